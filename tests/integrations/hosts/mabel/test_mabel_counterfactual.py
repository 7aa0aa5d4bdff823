"""Counterfactual gender swapping on tricky cases."""

from __future__ import annotations

import pytest

from cl_plugins.integrations.hosts.mabel.counterfactual import has_swappable, load_word_pairs, swap_gender, swap_table

PAIRS = [("he", "she"), ("him", "her"), ("his", "her"), ("man", "woman"), ("guy", "gal"), ("guy", "girl"),
         ("boy", "girl"), ("mr.", "mrs."), ("mr.", "ms."), ("sir", "ma'am"), ("chairman", "chairwoman")]  # fmt: skip


@pytest.fixture
def table():
    return swap_table(PAIRS)


@pytest.mark.parametrize(
    "sentence, expected",
    [
        ("He gave her his book.", "She gave his her book."),  # her -> his (possessive reading)
        ("The man met a woman.", "The woman met a man."),  # both directions, no double swap
        ("HE SAID SO", "SHE SAID SO"),  # case kept
        ("She manages the chairman's office.", "He manages the chairwoman's office."),  # whole words only
        ("Mr. Smith met Mrs. Jones and Ms. Lee.", "Mrs. Smith met Mr. Jones and Mr. Lee."),
        ("Yes, sir! Yes, ma'am.", "Yes, ma'am! Yes, sir."),
        ("The girl, a guy and a boy.", "The guy, a gal and a girl."),  # first pair wins: girl -> guy here
        ("he's here; (him) too", "she's here; (her) too"),  # contractions and brackets
        ("The sheriff shepherds the herd.", "The sheriff shepherds the herd."),  # not gendered
        ("", ""),
    ],
)
def test_swap(sentence, expected, table):
    assert swap_gender(sentence, table) == expected


def test_table_and_real_list(data_root):
    t = swap_table(PAIRS, overrides={})
    assert t["her"] == "him" and t["girl"] == "guy" and t["gal"] == "guy"
    assert has_swappable("Ask him.", t) and not has_swappable("Ask them.", t)
    pairs = load_word_pairs()
    assert len(pairs) == 57 and ("actor", "actress") in pairs
    real = swap_table(pairs)
    assert swap_gender("My uncle and his wife are actors.", real) == "My aunt and her husband are actresses."
    assert real["girl"] == "boy" and real["her"] == "his"  # in bias-bench's order boy/girl comes first
    with pytest.raises(ValueError, match="pairs"):
        load_word_pairs("race")
    with pytest.raises(ValueError, match="bias_type"):
        load_word_pairs("age")
