"""DCRec data readers: RecBole atomic files, DCRec's prefix splits, MovieLens, leave-one-out."""

from __future__ import annotations

import pytest

from cl_plugins.integrations.hosts.dcrec.data import leave_one_out, load_dcrec_split, read_atomic, read_movielens


def test_atomic_file_types(tmp_path):
    path = tmp_path / "toy.train.inter"
    path.write_text("session_id:token\titem_id_list:token_seq\titem_id:token\tw:float\n0\ta b\tc\t0.5\n1\tc\ta\t1\n")
    cols = read_atomic(path)
    assert cols["session_id"] == ["0", "1"] and cols["item_id_list"] == [["a", "b"], ["c"]]
    assert cols["item_id"] == ["c", "a"] and cols["w"] == [0.5, 1.0]
    (tmp_path / "bad.inter").write_text("session_id\titem_id\n")
    with pytest.raises(ValueError, match="name:type"):
        read_atomic(tmp_path / "bad.inter")


def test_dcrec_split_shares_one_vocabulary(tmp_path):
    folder = tmp_path / "recsys" / "dcrec" / "dataset" / "toy"
    folder.mkdir(parents=True)
    header = "session_id:token\titem_id_list:token_seq\titem_id:token\n"
    (folder / "toy.train.inter").write_text(header + "0\t7 8\t9\n")
    (folder / "toy.test.inter").write_text(header + "0\t9 7\t5\n")
    train, test, vocab = load_dcrec_split("toy", root=tmp_path)
    assert train.histories == [[1, 2]] and train.targets == [3]
    assert test.histories == [[3, 1]] and test.targets == [4] and len(vocab) == 5  # 4 items + padding
    with pytest.raises(FileNotFoundError, match="CL_PLUGINS_DATA|data root"):
        load_dcrec_split("missing", root=tmp_path)


def test_movielens_formats_and_leave_one_out(tmp_path):
    (tmp_path / "u.data").write_text("1\t10\t5\t300\n1\t11\t3\t100\n1\t12\t4\t200\n2\t10\t1\t50\n1\t13\t2\t400\n")
    (tmp_path / "ratings.dat").write_text("1::10::5::300\n")
    assert read_movielens(tmp_path / "ratings.dat") == [("1", "10", 5.0, 300)]
    loo = leave_one_out(read_movielens(tmp_path / "u.data"))
    # user 1 in time order: 11, 12, 10, 13 -> train [11, 12], validation 10, test 13; user 2 is too short
    ids = loo.vocab.ids
    assert loo.train == {"1": [ids["11"], ids["12"]]}
    assert loo.valid.histories == [[ids["11"], ids["12"]]] and loo.valid.targets == [ids["10"]]
    assert loo.test.histories == [[ids["11"], ids["12"], ids["10"]]] and loo.test.targets == [ids["13"]]
    with pytest.raises(ValueError, match="min_length"):
        leave_one_out([], min_length=2)


def test_real_splits(data_root):
    train, test, vocab = load_dcrec_split("beauty")
    assert len(train.targets) == len(test.targets) == 56848 and len(vocab) == 41533
    ml = read_movielens(data_root / "recsys" / "movielens" / "ml-100k" / "u.data")
    loo = leave_one_out(ml)
    assert len(ml) == 100000 and len(loo.train) == 943 and len(loo.vocab) == 1683


def test_a_cut_test_file_is_refused(tmp_path):
    folder = tmp_path / "recsys" / "dcrec" / "dataset" / "toy"
    folder.mkdir(parents=True)
    header = "session_id:token\titem_id_list:token_seq\titem_id:token\n"
    rows = [f"{u}\t7 8\t9\n" for u in range(200)]
    (folder / "toy.train.inter").write_text(header + "".join(rows))
    (folder / "toy.test.inter").write_text(header + "".join(rows[:199]))  # one user of 200 lost: 0.5 %, printed
    assert len(load_dcrec_split("toy", root=tmp_path)[1].users) == 199
    (folder / "toy.test.inter").write_text(header + "".join(rows[:100]))  # cut at a line boundary
    with pytest.raises(ValueError, match="100 of 200 training users have no test row"):
        load_dcrec_split("toy", root=tmp_path)
