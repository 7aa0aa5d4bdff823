"""Downloads against a local HTTP server: success, resume after a cut, checksum mismatch, server errors,
offline mode, range-limited heads, archives; and real loaders fetching real registry entries from a mirror."""

from __future__ import annotations

import hashlib
import io
import tarfile
import threading
import time
import urllib.parse
import zipfile
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from cl_plugins.integrations.data import catalogue
from cl_plugins.integrations.data.catalogue import Dataset, Source, data_path
from cl_plugins.integrations.data.downloads import ChecksumError, DownloadError, Expected, download, mismatch


class Server:
    """Files under ``root`` over HTTP with byte ranges; ``faults[path]`` injects "cut" (half the body, once),
    "cut-always", "500", "500-once", "no-range" or "stall" (headers, then silence); ``requests`` logs (path, Range
    header)."""

    def __init__(self, root: Path) -> None:
        self.root, self.faults, self.requests = root, {}, []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: object) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - the http.server API
                path = urllib.parse.unquote(self.path.lstrip("/"))
                server.requests.append((path, self.headers.get("Range")))
                fault = server.faults.get(path, "")
                if fault.startswith("500"):
                    if fault == "500-once":
                        server.faults.pop(path)
                    self.send_error(500, "injected")
                    return
                file = server.root / path
                if not file.is_file():
                    self.send_error(404)
                    return
                body, start = file.read_bytes(), 0
                rng = self.headers.get("Range")
                if rng and fault != "no-range":
                    first, _, last = rng.removeprefix("bytes=").partition("-")
                    start, end = int(first), int(last) if last else len(body) - 1
                    if start >= len(body):
                        self.send_error(416)
                        return
                    body = body[start : end + 1]
                    self.send_response(206)
                else:
                    self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                if fault == "stall":
                    self.wfile.flush()
                    time.sleep(1.0)
                    return
                if fault.startswith("cut"):
                    if fault == "cut":
                        server.faults.pop(path)
                    self.wfile.write(body[: len(body) // 2])
                    self.wfile.flush()
                    self.close_connection = True
                    return
                self.wfile.write(body)

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def put(self, relative: str, data: bytes) -> str:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)
        return f"{self.url}/{relative}"


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Server]:
    srv = Server(tmp_path / "served")
    yield srv
    srv.httpd.shutdown()


@pytest.fixture
def online(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """An empty writable data root with downloads allowed (and no waiting between retries)."""
    root = tmp_path / "data"
    root.mkdir()
    monkeypatch.setenv("CL_PLUGINS_DATA", str(root))
    monkeypatch.setenv("CL_PLUGINS_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CL_PLUGINS_RETRY_SCALE", "0")
    for var in ("CL_PLUGINS_OFFLINE", "HF_HUB_OFFLINE", "CL_PLUGINS_DATA_MIRROR"):
        monkeypatch.delenv(var, raising=False)
    return root


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


PAYLOAD = bytes(range(256)) * 4000  # 1 MB: several read chunks


def test_download_verifies_and_renames(server: Server, online: Path) -> None:
    url = server.put("a/file.bin", PAYLOAD)
    dest = online / "x" / "file.bin"
    download(url, dest, Expected(size=len(PAYLOAD), sha256=sha(PAYLOAD)))
    assert dest.read_bytes() == PAYLOAD
    assert list(dest.parent.iterdir()) == [dest]  # no part file left


def test_checksum_mismatch_names_file_and_both_hashes(server: Server, online: Path) -> None:
    url = server.put("f.bin", PAYLOAD)
    dest, wrong = online / "f.bin", "0" * 64
    with pytest.raises(ChecksumError) as err:
        download(url, dest, Expected(sha256=wrong))
    message = str(err.value)
    assert str(dest) in message and wrong in message and sha(PAYLOAD) in message
    assert not dest.exists() and not any(online.iterdir())


def test_md5_and_size_checks(tmp_path: Path) -> None:
    f = tmp_path / "f"
    f.write_bytes(b"abc")
    assert mismatch(f, Expected(size=3, md5=hashlib.md5(b"abc").hexdigest())) is None
    assert "size 3 bytes, expected 4" in mismatch(f, Expected(size=4))
    assert "md5" in mismatch(f, Expected(md5="0" * 32))


def test_truncated_transfer_resumes_with_a_range(server: Server, online: Path) -> None:
    url = server.put("f.bin", PAYLOAD)
    server.faults["f.bin"] = "cut"
    download(url, online / "f.bin", Expected(sha256=sha(PAYLOAD)))
    assert (online / "f.bin").read_bytes() == PAYLOAD
    assert server.requests[0][1] is None and server.requests[1][1] == f"bytes={len(PAYLOAD) // 2}-"


def test_persistent_cut_fails_then_a_later_call_resumes(server: Server, online: Path) -> None:
    url = server.put("f.bin", PAYLOAD)
    server.faults["f.bin"] = "cut-always"
    with pytest.raises(DownloadError, match="after 3 attempts; run again to resume"):
        download(url, online / "f.bin", Expected(sha256=sha(PAYLOAD)))
    part = online / ".f.bin.part"
    assert part.exists() and not (online / "f.bin").exists()
    server.faults.clear()
    download(url, online / "f.bin", Expected(sha256=sha(PAYLOAD)))
    assert (online / "f.bin").read_bytes() == PAYLOAD and not part.exists()


def test_server_ignoring_ranges_restarts_cleanly(server: Server, online: Path) -> None:
    url = server.put("f.bin", PAYLOAD)
    (online / ".f.bin.part").write_bytes(b"garbage that is not the start")
    server.faults["f.bin"] = "no-range"
    download(url, online / "f.bin", Expected(sha256=sha(PAYLOAD)))
    assert (online / "f.bin").read_bytes() == PAYLOAD


def test_server_errors(server: Server, online: Path) -> None:
    url = server.put("f.bin", PAYLOAD)
    server.faults["f.bin"] = "500-once"
    download(url, online / "f.bin", Expected(sha256=sha(PAYLOAD)))  # retried
    server.faults["f.bin"] = "500"
    with pytest.raises(DownloadError, match="500"):
        download(url, online / "g.bin")
    with pytest.raises(DownloadError, match="404"):
        download(f"{server.url}/missing.bin", online / "m.bin")
    assert sum(p == "missing.bin" for p, _ in server.requests) == 1  # a 4xx is not retried


def test_a_stall_fails_after_the_timeout_in_one_line(server: Server, online: Path, capsys) -> None:
    url = server.put("slow.bin", PAYLOAD)
    server.faults["slow.bin"] = "stall"
    started = time.monotonic()
    with pytest.raises(DownloadError, match=r"stalled, no data for 0.2 s \(after 3 attempts; run again to resume\)"):
        download(url, online / "slow.bin", timeout=0.2)
    assert time.monotonic() - started < 5  # bounded: retries x timeout


def test_a_web_page_in_place_of_an_unregistered_file_is_refused(server: Server, online: Path, monkeypatch,
                                                                capsys) -> None:  # fmt: skip
    """A file with no registered size or hash: what can be checked is checked, and the CLI never says "verified"."""
    from cl_plugins.integrations.data import cli as data_cli

    page = b"<!DOCTYPE html>\n<html><body>404 - this repository moved</body></html>"
    with pytest.raises(ChecksumError, match="the server sent an HTML / XML error page, not the file"):
        download(server.put("page.csv", page), online / "page.csv")
    assert not (online / "page.csv").exists() and not list(online.glob(".page.csv.part"))
    good = b"smiles,label\nCCO,1\n"
    entry = Dataset("loose", "fixture", {"l/x.csv": Expected()}, (Source(server.put("x.csv", good), "l/x.csv"),),
                    "test", "none published")  # fmt: skip
    monkeypatch.setattr(catalogue, "registry", lambda: {"loose": entry})
    assert data_cli.main(["download", "loose"]) == 0
    out = capsys.readouterr().out
    assert "unverifiable: 1 of 1 files have no registered size or hash" in out and "verified" not in out


def tar_of(members: dict[str, bytes], mode: str) -> bytes:
    """A tar archive (``mode`` "w" or "w:gz") holding ``members`` (name -> bytes)."""
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode=mode) as tar:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()


def tiny_dataset(server: Server) -> Dataset:
    """A file, a range-limited head and a tar whose payload sits two folders deep."""
    lines = b"".join(f"sentence {i}\n".encode() for i in range(1000))
    head = lines[: len(b"".join(f"sentence {i}\n".encode() for i in range(10)))]
    archive = tar_of({"pkg/inner/A.txt": b"a\n", "pkg/inner/sub/B.txt": b"b\n"}, "w:gz")
    files = {"t/one.txt": Expected(size=3, sha256=sha(b"one")), "t/head.txt": Expected(len(head), sha(head)),
             "t/arch/A.txt": Expected(sha256=sha(b"a\n")), "t/arch/sub/B.txt": Expected(sha256=sha(b"b\n"))}
    sources = (Source(server.put("one.txt", b"one"), "t/one.txt", expect=files["t/one.txt"]),
               Source(server.put("lines.txt", lines), "t/head.txt", "head", expect=files["t/head.txt"]),
               Source(server.put("arch.tar.gz", archive), "t/arch", "archive", anchor="sub/B.txt"))
    return Dataset("tiny", "fixture", files, sources, "test", "made in the test")


def test_fetch_file_head_and_archive(server: Server, online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    dataset = tiny_dataset(server)
    monkeypatch.setattr(catalogue, "registry", lambda: {"tiny": dataset})
    assert catalogue.status(dataset)[0] == "missing"
    assert data_path("t/arch/sub/B.txt").read_text() == "b\n"  # a loader's call fetches the whole entry
    assert catalogue.status(dataset) == ("present", [])
    head_requests = [r for p, r in server.requests if p == "lines.txt"]
    assert head_requests == [f"bytes=0-{dataset.files['t/head.txt'].size - 1}"]
    assert not (online / ".downloads" / "arch.tar.gz").exists()
    (online / "t/one.txt").write_text("two")
    assert catalogue.status(dataset)[0] == "corrupt"


def test_offline_keeps_the_clear_error_and_never_connects(server: Server, online: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    dataset = tiny_dataset(server)
    monkeypatch.setattr(catalogue, "registry", lambda: {"tiny": dataset})
    for var in ("CL_PLUGINS_OFFLINE", "HF_HUB_OFFLINE"):
        monkeypatch.setenv(var, "1")
        with pytest.raises(FileNotFoundError, match=r"t/one.txt was not found .*cl-plugins data download tiny"):
            data_path("t/one.txt", hint="somewhere")
        monkeypatch.delenv(var)
    assert server.requests == []


def test_no_network_becomes_the_not_found_error(online: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    closed = Source("http://127.0.0.1:9/nothing.txt", "t/one.txt")  # port 9 (discard): connection refused
    dataset = Dataset("tiny", "fixture", {"t/one.txt": Expected()}, (closed,), "test", "none")
    monkeypatch.setattr(catalogue, "registry", lambda: {"tiny": dataset})
    with pytest.raises(FileNotFoundError, match=r"t/one.txt is not under the data root .* downloading it failed"):
        data_path("t/one.txt")


def test_read_only_data_root_downloads_into_the_cache(server: Server, online: Path, tmp_path: Path,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    dataset = tiny_dataset(server)
    monkeypatch.setattr(catalogue, "registry", lambda: {"tiny": dataset})
    monkeypatch.setattr(catalogue.os, "access", lambda path, mode: False)
    path = data_path("t/one.txt")
    assert path == tmp_path / "cache" / "data" / "t/one.txt" and not (online / "t").exists()


# real entries, real loaders: the registry's URLs served by a mirror on 127.0.0.1 from the data pack's files


def mirror(server: Server, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CL_PLUGINS_DATA_MIRROR", server.url)


def served_path(url: str) -> str:
    parts = urllib.parse.urlsplit(url)
    return parts.netloc + parts.path


def serve_per_file(server: Server, name: str, pack: Path) -> None:
    for source in catalogue.get(name).sources:
        server.put(served_path(source.url), (pack / source.target).read_bytes())


def test_real_loaders_download_their_entries(server: Server, online: Path, data_root: Path,
                                             monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    from cl_plugins.integrations.evaluation.bias.crows_pairs import load_crows_pairs
    from cl_plugins.integrations.evaluation.bias.seat import load_seat_test

    online_root = online
    monkeypatch.setenv("CL_PLUGINS_DATA", str(online_root))
    mirror(server, monkeypatch)
    for name in ("bias-bench", "crows-pairs"):
        serve_per_file(server, name, data_root)
    assert len(load_seat_test("weat1")["X"]) == 25
    assert len(load_crows_pairs()) == 1508
    assert catalogue.status(catalogue.get("bias-bench"))[0] == "present"


def test_the_main_jobs_data_downloads(server: Server, online: Path, data_root: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    """What ``examples/simcse_macl.py`` reads without a pack: wiki1m's head (a range of the full file) and
    SentEval's senteval.tar (built here from the pack's files, nested as SimCSE's archive nests them)."""
    from cl_plugins.integrations.evaluation.senteval import readers
    from cl_plugins.integrations.hosts.simcse.train_then_evaluate import wiki_file

    mirror(server, monkeypatch)
    head = (data_root / "sentence/simcse/wiki1m_for_simcse.head.txt").read_bytes()
    wiki_url = catalogue.get("wiki1m").sources[0].url
    server.put(served_path(wiki_url), head + b"more sentences past the head\n" * 1000)
    senteval = catalogue.get("senteval")
    archive = io.BytesIO()
    with tarfile.open(fileobj=archive, mode="w") as tar:
        for rel in senteval.files:
            tar.add(data_root / rel, arcname="downstream/" + rel.removeprefix(catalogue.SENTEVAL + "/"))
    server.put(served_path(senteval.sources[0].url), archive.getvalue())
    assert wiki_file(paper=False).read_bytes() == head
    assert len(readers.read_stsb("test").scores) == 1379
    assert catalogue.status(senteval) == ("present", [])


def test_a_tu_zip_downloads_and_loads(server: Server, online: Path, data_root: Path,
                                      monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    pytest.importorskip("torch_geometric")
    from cl_plugins.integrations.hosts.graph.datasets import load_tu

    mirror(server, monkeypatch)
    entry = catalogue.get("tu-mutag")
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as z:
        for rel in entry.files:
            z.write(data_root / rel, "MUTAG/" + Path(rel).name)
    server.put(served_path(entry.sources[0].url), buffer.getvalue())
    assert len(load_tu("MUTAG")) == 188


def test_a_wrong_archive_member_is_refused_before_anything_is_placed(
    server: Server, online: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    files = {"t/A.txt": Expected(sha256=sha(b"a\n")), "t/B.txt": Expected(sha256=sha(b"b\n"))}
    archive = tar_of({"pkg/A.txt": b"a\n", "pkg/B.txt": b"not b\n"}, "w")
    source = Source(server.put("arch.tar", archive), "t", "archive", anchor="A.txt")
    dataset = Dataset("tiny", "fixture", files, (source,), "test", "made in the test")
    monkeypatch.setattr(catalogue, "registry", lambda: {"tiny": dataset})
    wrong, right = sha(b"not b\n"), sha(b"b\n")
    with pytest.raises(ChecksumError, match=rf"t/B.txt: sha256 {wrong}, expected {right}"):
        catalogue.fetch(dataset)
    assert not (online / "t").exists() and not (online / ".downloads" / "arch.tar").exists()
