"""``cl-plugins data``: what the registry knows, what is here, and downloads.

    cl-plugins data list                 # every dataset: present / missing, size, checksum source
    cl-plugins data download senteval    # fetch (checksummed) into the data root, or the cache if read-only
    cl-plugins data verify               # sizes and hashes of everything present
"""

from __future__ import annotations

import argparse

from cl_plugins.integrations.command_line import new_parser, one_line_errors
from cl_plugins.integrations.data import catalogue
from cl_plugins.integrations.data.paths import data_root


def _size(n: int | None) -> str:
    return "?" if n is None else f"{n / 1e6:.1f} MB" if n >= 1e5 else f"{n / 1e3:.1f} kB"


def _names(names: list[str]) -> list[catalogue.Dataset]:
    return list(catalogue.registry().values()) if names in ([], ["all"]) else [catalogue.get(n) for n in names]


def markdown_table() -> str:
    """The registry as the table of ``docs/data.md``."""
    rows = ["| name | what | files | size | sources | licence | checksums |", "|---|---|---|---|---|---|---|"]
    for d in catalogue.registry().values():
        hosts = sorted({s.url.split("/")[2] for s in d.sources}) or ["none"]
        rows.append(f"| `{d.name}` | {d.what} | {len(d.files)} | {_size(d.size)} | {', '.join(hosts)} | {d.licence} "
                    f"| {d.checksums} |")  # fmt: skip
    return "\n".join(rows) + "\n"


def list_datasets(args: argparse.Namespace) -> int:
    if args.markdown:
        print(markdown_table(), end="")
        return 0
    print(f"data root: {data_root()}  (downloads go to {catalogue.download_root()})")
    for d in catalogue.registry().values():
        state = catalogue.status(d, deep=False)[0]
        source = "no download" if not d.sources else f"{len(d.sources)} source{'s' * (len(d.sources) > 1)}"
        print(f"{d.name:20} {state:8} {_size(d.size):>9}  {source:11}  {d.what}  [checksums: {d.checksums}]")
    return 0


def _checked(d: catalogue.Dataset) -> str:
    """What "present" means for ``d``: verified, sizes only, or unverifiable (never "verified" for those)."""
    unknown = sum(not e.known for e in d.files.values())
    hashless = sum(e.known and not e.verifiable for e in d.files.values())
    if unknown:
        return (f"unverifiable: {unknown} of {len(d.files)} files have no registered size or hash (checked only "
                "that they are not web pages)")  # fmt: skip
    if hashless:
        return f"sizes checked ({hashless} of {len(d.files)} files have no hash)"
    return "verified"


def download(args: argparse.Namespace) -> int:
    for d in _names(args.names):
        if not d.sources:
            print(f"{d.name}: skipped, no download source ({d.checksums})")
            continue
        root = catalogue.fetch(d, force=args.force)
        check = _checked(d)
        print(f"{d.name}: present and verified under {root}" if check == "verified" else
              f"{d.name}: present under {root}, {check}")  # fmt: skip
    return 0


def verify(args: argparse.Namespace) -> int:
    bad = 0
    for d in _names(args.names):
        state, problems = catalogue.status(d)
        print(f"{d.name:20} {state}" + (f" ({_checked(d)})" if state == "present" else ""))
        if state == "corrupt":
            bad += 1
            for problem in problems:
                print(f"    {problem}")
    return 1 if bad else 0


@one_line_errors
def main(argv: list[str] | None = None) -> int:
    parser = new_parser(__doc__)
    sub = parser.add_subparsers(dest="action", required=True)
    listing = sub.add_parser("list", help="every registered dataset and whether it is here")
    listing.add_argument("--markdown", action="store_true", help="the registry as a markdown table (docs/data.md)")
    listing.set_defaults(run=list_datasets)
    get = sub.add_parser("download", help="fetch datasets (names, or all) and verify them")
    get.add_argument("names", nargs="*", help="registry names (default: all)")
    get.add_argument("--force", action="store_true", help="download again even when present")
    get.set_defaults(run=download)
    check = sub.add_parser("verify", help="check sizes and hashes of the present files (exit 1 if any is corrupt)")
    check.add_argument("names", nargs="*", help="registry names (default: all)")
    check.set_defaults(run=verify)
    args = parser.parse_args(argv)
    status = args.run(args)
    if status:
        raise SystemExit(status)
    return status
