"""`clover-struct extract` accounts for every input whatever it holds, keeps one run per
output, stops cleanly on SIGINT/SIGTERM and resumes to exactly what an uninterrupted run
writes."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

import clover_struct.api as api
from clover_struct import batch_io, cli
from test_cli import lines, model_dir, run, schema_file  # noqa: F401  (fixtures)


def feed_of(path, n, broken=()):
    rows = [json.dumps({"text": f"notice {i}: zone {chr(97 + i % 26) * (1 + i % 4)}"}) for i in range(n)]
    for i in broken:
        rows[i] = "{broken"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_help_says_what_the_exit_codes_mean(capsys):
    assert run("extract", "--help") == 0
    out = capsys.readouterr().out
    for code, words in (("0", "every input was extracted"), ("1", "some inputs failed"), ("2", "could not start"),
                        ("130", "SIGINT"), ("143", "SIGTERM")):
        assert any(line.strip().startswith(code) and words in line for line in out.splitlines()), code


def test_a_record_whose_decoding_fails_is_an_error_row_and_its_neighbours_are_written(
        tmp_path, model_dir, schema_file, monkeypatch, capsys):
    feed = feed_of(tmp_path / "feed.jsonl", 6)
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "ref.jsonl") == 0
    capsys.readouterr()
    decode, poison = api.decode, json.loads(feed.read_text().splitlines()[2])["text"]

    def poisoned(model, prompts, *args, **kwargs):
        if any(poison in model.tokenizer.decode(p) for p in prompts):
            raise IndexError("only integers, slices ... are valid indices")
        return decode(model, prompts, *args, **kwargs)
    monkeypatch.setattr(api, "decode", poisoned)
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "o.jsonl") == 1
    err = capsys.readouterr().err
    assert "Traceback" not in err and "5 succeeded, 1 failed" in err
    assert lines(tmp_path / "o.jsonl") == [r for r in lines(tmp_path / "ref.jsonl") if not r["source"].endswith(":3")]
    [row] = lines(tmp_path / "o.errors.jsonl")
    assert row["source"].endswith(":3") and "IndexError" in row["error"]


def test_a_batch_that_fails_as_a_whole_is_run_again_record_by_record(tmp_path, model_dir, schema_file,
                                                                     monkeypatch, capsys):
    feed = feed_of(tmp_path / "feed.jsonl", 5)
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "ref.jsonl") == 0
    real, calls = api.extract_many, []

    def flaky(texts, schema, **kwargs):
        calls.append(len(texts))
        if len(texts) > 1 or "notice 1:" in texts[0]:
            raise MemoryError("out of memory")
        return real(texts, schema, **kwargs)
    monkeypatch.setattr(api, "extract_many", flaky)
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "o.jsonl",
               "--batch-size", 5) == 1
    assert calls == [5, 1, 1, 1, 1, 1]
    assert lines(tmp_path / "o.jsonl") == [r for r in lines(tmp_path / "ref.jsonl") if not r["source"].endswith(":2")]
    assert "MemoryError: out of memory" in lines(tmp_path / "o.errors.jsonl")[0]["error"]


def test_inputs_of_every_kind_are_a_record_or_an_error_row(tmp_path, model_dir, schema_file, monkeypatch):
    monkeypatch.setattr(batch_io, "MAX_TEXT_BYTES", 2000)
    d = tmp_path / "in"
    d.mkdir()
    (d / "utf16.txt").write_bytes("zone délta".encode("utf-16"))
    (d / "bom.txt").write_bytes(b"\xef\xbb\xbfzone bom")
    (d / "huge.txt").write_bytes(b"x" * 5000)
    (d / "latin1.txt").write_bytes("café zone".encode("latin-1"))
    (d / "nul.md").write_bytes(b"zone\0zone")
    (d / "deep.jsonl").write_text("[" * 1500 + "\n")
    (d / "lines.jsonl").write_bytes(b'{"text": "zone one"}\n' + b'{"text": "' + b"y" * 3000 + b'"}\n'
                                    + b'{"text": "lone \\ud800 surrogate"}\n{"text": "zone two"}')
    (d / "wide.jsonl").write_bytes('{"text": "zone wide"}\n'.encode("utf-16"))
    (d / "upper.NDJSON").write_text('{"text": "zone upper"}\n')
    (d / "marked.jsonl").write_bytes(b'\xef\xbb\xbf{"text": "zone marked"}\n')   # Notepad's UTF-8 mark
    (d / "bare16.txt").write_bytes("zone délta".encode("utf-16-le"))   # UTF-16 without its mark
    (d / "bare16.jsonl").write_bytes('{"text": "zone"}\n{"text": "x"}\n'.encode("utf-16-le"))   # (a NUL row a line)
    os.mkfifo(d / "pipe.txt")
    name = os.fsdecode(b"caf\xe9.txt")   # a file name that is not UTF-8
    (d / name).write_text("zone cafe")
    out = tmp_path / "out.jsonl"
    assert run("extract", d, "--schema", schema_file, "--model", model_dir, "-o", out, "--quiet") == 1
    got = {r["source"].removeprefix(str(d) + "/") for r in lines(out)}
    errors = {e["source"].removeprefix(str(d) + "/"): e["error"] for e in lines(tmp_path / "out.errors.jsonl")}
    assert got == {"utf16.txt", "bom.txt", "lines.jsonl:1", "lines.jsonl:4", "upper.NDJSON:1", "marked.jsonl:1", name}
    assert set(errors) == {"huge.txt", "latin1.txt", "nul.md", "deep.jsonl:1", "lines.jsonl:2", "lines.jsonl:3",
                           "pipe.txt", "wide.jsonl", "bare16.txt", "bare16.jsonl"}
    for source, words in {"huge.txt": "not read", "latin1.txt": "not UTF-8", "nul.md": "NUL", "pipe.txt": "regular file",
                          "deep.jsonl:1": "invalid JSON", "lines.jsonl:2": "split it",
                          "lines.jsonl:3": "lone surrogate", "wide.jsonl": "convert the file to UTF-8",
                          "bare16.jsonl": "convert the file to UTF-8",
                          "bare16.txt": "iconv -f UTF-16LE"}.items():
        assert words in errors[source], (source, errors[source])
    assert run("extract", d, "--schema", schema_file, "--model", model_dir, "-o", out, "--resume") == 1
    assert len(lines(out)) == 7 and len(lines(tmp_path / "out.errors.jsonl")) == 10   # the odd name read back too
    (tmp_path / "rows.csv").write_text("id,text\n1,zone one\n2,zone two\n")   # tables named as one text each:
    (tmp_path / "rows.json").write_text('[{"text": "zone one"}, {"text": "zone two"}]')   # had been one record
    assert run("extract", tmp_path / "rows.csv", tmp_path / "rows.json", "--schema", schema_file, "--model", model_dir,
               "-o", tmp_path / "t.jsonl", "--quiet") == 1
    assert [e["error"].split(" holds")[0] for e in lines(tmp_path / "t.errors.jsonl")] == ["a CSV file", "a JSON array"]


def test_folders_links_and_encodings_each_give_a_record_or_a_row_that_says_why(tmp_path, model_dir, schema_file,
                                                                               monkeypatch):
    """A folder one may not list and an input folder with nothing to read are rows (they had been
    skipped, exit 0); a link to a folder is walked, once; a JSONL line that is not UTF-8 says so
    (not a codec's words), as does an escaped lone surrogate."""
    d, linked, empty = tmp_path / "in", tmp_path / "linked", tmp_path / "empty"
    for folder in (d / "real", d / "locked", linked, empty):
        folder.mkdir(parents=True)
    (d / "real" / "b.txt").write_text("zone real")
    (d / "locked" / "c.txt").write_text("zone locked")
    (linked / "a.txt").write_text("zone linked")
    (d / "link").symlink_to(linked)
    (d / "link2").symlink_to(linked)   # two links to one folder: its files read once
    (d / "loop").symlink_to(d)   # a link back: each folder walked once
    (d / "lines.jsonl").write_bytes('{"text": "café"}\n'.encode("latin-1") + b'{"text": "\xed\xa0\x80"}\n'
                                    + b'{"text": "half \\ud83d"}\n' + b'{"text": "zone", "id": 1' + b"0" * 5000 + b'}\n')
    (empty / "notes.json").write_text("{}")
    scandir = os.scandir

    def refused(path="."):   # (root reads any folder: a folder others may not list, as they see it)
        if os.fspath(path).endswith("locked"):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return scandir(path)
    monkeypatch.setattr(os, "scandir", refused)
    out = tmp_path / "out.jsonl"
    assert run("extract", d, empty, "--schema", schema_file, "--model", model_dir, "-o", out, "--quiet") == 1
    assert sorted(r["source"].removeprefix(f"{d}/") for r in lines(out)) == ["link/a.txt", "real/b.txt"]
    errors = {e["source"].removeprefix(f"{d}/"): e["error"] for e in lines(tmp_path / "out.errors.jsonl")}
    assert set(errors) == {"locked", "lines.jsonl:1", "lines.jsonl:2", "lines.jsonl:3", "lines.jsonl:4", str(empty)}
    for source, words in {"locked": "Permission denied", "lines.jsonl:1": "not UTF-8 text",
                          "lines.jsonl:2": "not UTF-8 text", "lines.jsonl:3": "lone surrogate",
                          "lines.jsonl:4": "more digits than Python reads",   # (had stopped the run)
                          str(empty): "holds no file to read"}.items():
        assert words in errors[source], (source, errors[source])


def test_truncate_reads_the_start_of_a_file_past_the_size_read(tmp_path, model_dir, schema_file, monkeypatch):
    """A text file over MAX_TEXT_BYTES is read to there with --truncate (it had been an error row
    still), cut before a character the limit splits."""
    monkeypatch.setattr(batch_io, "MAX_TEXT_BYTES", 2000)
    (tmp_path / "big.txt").write_text("xx" + "zone é " * 400)   # 3,202 bytes; byte 2,000 falls inside an é
    argv = ["extract", tmp_path / "big.txt", "--schema", schema_file, "--model", model_dir, "-o"]
    assert run(*argv, tmp_path / "a.jsonl") == 1
    assert "pass --truncate" in lines(tmp_path / "a.errors.jsonl")[0]["error"]
    assert run(*argv, tmp_path / "b.jsonl", "--truncate") == 0
    assert [(s, len(t.encode())) for s, t, _ in batch_io.records([tmp_path / "big.txt"], "text", True)] == \
        [(str(tmp_path / "big.txt"), 1999)]
    (tmp_path / "wide.txt").write_bytes(("xy" + "😀" * 800).encode("utf-16"))   # a pair split at byte 2,000
    ((_, text, why),) = batch_io.records([tmp_path / "wide.txt"], "text", True)
    assert why is None and text == "xy" + "😀" * 498
    (tmp_path / "nul.txt").write_bytes(b"\xff\xfe" + b"\0" * 64)   # NULs behind a byte order mark: no text
    assert "binary" in next(batch_io.records([tmp_path / "nul.txt"], "text"))[2]


def test_records_reach_a_stdout_that_cannot_write_them_as_escapes():
    """Windows writes a redirected stdout in cp1252: a Chinese record had stopped the run."""
    import io

    stream = io.TextIOWrapper(io.BytesIO(), encoding="cp1252")
    batch_io.Sink(None, stream).write({"source": "a.txt", "record": {"reason": "禁飞区"}})
    stream.flush()
    assert json.loads(stream.buffer.getvalue()) == {"source": "a.txt", "record": {"reason": "禁飞区"}}


def test_a_stdout_that_fails_is_named_and_a_closed_pipe_stops_quietly():
    """stdout on a full disk had been 'error: [Errno 28] No space left on device', naming no file."""
    import errno

    class Full:
        name = "<stdout>"

        def __init__(self, number):
            self.number = number

        def write(self, line=None):
            raise OSError(self.number, os.strerror(self.number))

        flush = write

    with pytest.raises(batch_io.CliError, match="<stdout>: cannot write .No space left on device.; give -o OUT"):
        batch_io.Sink(None, Full(errno.ENOSPC)).write({"source": "a.txt", "record": {}})
    with pytest.raises(batch_io.CliError, match="<stdout>: cannot write"):
        batch_io.Sink(None, Full(errno.EIO)).sync()
    with pytest.raises(BrokenPipeError):   # the CLI's own `| head` case
        batch_io.Sink(None, Full(errno.EPIPE)).write({"source": "a.txt", "record": {}})


def test_an_empty_output_name_is_refused(tmp_path, schema_file, capsys):
    """`-o ""` (an unset shell variable) had written the records to stdout."""
    (tmp_path / "a.txt").write_text("a zone")
    assert run("extract", tmp_path / "a.txt", "--schema", schema_file, "-o", "") == 2
    assert "-o takes a file name (or - for stdout), not an empty one" in capsys.readouterr().err


def test_dash_is_stdout_for_records_and_no_input(tmp_path, model_dir, schema_file, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    feed = feed_of(tmp_path / "feed.jsonl", 2)
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", "-", "--quiet", "--json") == 0
    printed = capsys.readouterr()
    assert [json.loads(x)["source"] for x in printed.out.splitlines()] == [f"{feed}:1", f"{feed}:2"]
    assert json.loads(printed.err)["succeeded"] == 2   # the summary beside the records would read as one
    assert not (tmp_path / "-").exists()
    assert run("extract", "-", "--schema", schema_file, "--model", model_dir) == 2
    assert "standard input is not read" in capsys.readouterr().err


def test_a_full_disk_names_the_output_and_the_way_on(tmp_path, model_dir, schema_file, capsys, monkeypatch):
    feed = feed_of(tmp_path / "feed.jsonl", 2)
    write = os.write

    def full(fd, data):
        if fd > 2:
            raise OSError(28, "No space left on device")
        return write(fd, data)
    monkeypatch.setattr(os, "write", full)
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "o.jsonl") == 2
    assert f"{tmp_path / 'o.jsonl'}: cannot write (No space left on device); free space, then run again with " \
           "--resume" in capsys.readouterr().err


def test_an_input_that_is_also_the_output_is_refused_untouched(tmp_path, model_dir, schema_file, capsys):
    feed = feed_of(tmp_path / "feed.jsonl", 2)
    before = feed.read_bytes()
    for out in (feed, tmp_path / "feed.json"):    # feed.json's errors file is feed.errors.jsonl
        target = out if out == feed else tmp_path / "feed.errors.jsonl"
        if target != feed:
            target.write_bytes(before)
        assert run("extract", target, "--schema", schema_file, "--model", model_dir, "-o", out) == 2
        assert "is also the output" in capsys.readouterr().err and target.read_bytes() == before


def test_an_input_a_folder_or_glob_holds_is_never_emptied_as_the_output(tmp_path, model_dir, schema_file, capsys):
    """-o naming a file the inputs reach through a folder or a glob: its lines are not ours, so it
    is refused untouched (it had been emptied); an earlier output there is written anew."""
    folder = tmp_path / "eat"
    folder.mkdir()
    feed = feed_of(folder / "notices.jsonl", 2)
    before = feed.read_bytes()
    for given in (folder, folder / "*.jsonl"):
        assert run("extract", given, "--schema", schema_file, "--model", model_dir, "-o", feed) == 2
        assert "did not write (an input?)" in capsys.readouterr().err and feed.read_bytes() == before
    out = folder / "out.jsonl"
    assert run("extract", folder, "--schema", schema_file, "--model", model_dir, "-o", out, "--quiet") == 0
    assert run("extract", folder, "--schema", schema_file, "--model", model_dir, "-o", out, "--quiet") == 0
    assert len(lines(out)) == 2


def test_a_glob_over_the_output_reads_none_of_what_a_run_writes(tmp_path, model_dir, schema_file, capsys):
    """'g/*' had read OUT.settings (and would read a killed run's locks) as a text: a third record."""
    folder = tmp_path / "g"
    folder.mkdir()
    (folder / "a.txt").write_text("zone a")
    (folder / "b.txt").write_text("zone b")
    out = folder / "out.jsonl"
    argv = ["extract", folder / "*", "--schema", schema_file, "--model", model_dir, "-o", out, "--quiet"]
    assert run(*argv) == 0
    (folder / "out.jsonl.lock").write_text("4242\n")   # what a kill -9 leaves
    assert run(*argv, "--resume") == 0 and run(*argv) == 0
    assert sorted(Path(r["source"]).name for r in lines(out)) == ["a.txt", "b.txt"]
    assert not (folder / "out.errors.jsonl").exists()


def test_outputs_sharing_an_errors_file_do_not_empty_each_others(tmp_path, model_dir, schema_file, capsys):
    """-o x.json beside x.jsonl had deleted x.jsonl's run's error rows (both write x.errors.jsonl)."""
    feed = feed_of(tmp_path / "feed.jsonl", 2, broken=[1])
    argv = ["extract", feed, "--schema", schema_file, "--model", model_dir, "--quiet", "-o"]
    assert run(*argv, tmp_path / "x.jsonl") == 1
    errors = (tmp_path / "x.errors.jsonl").read_bytes()
    assert run(*argv, tmp_path / "x.json") == 2
    assert "holds the errors of the run that wrote" in capsys.readouterr().err
    assert (tmp_path / "x.errors.jsonl").read_bytes() == errors
    assert run(*argv, tmp_path / "x.jsonl") == 1   # its own run again: written anew


def test_an_output_that_is_a_folder_is_refused_before_anything_is_written(tmp_path, schema_file, capsys):
    (tmp_path / "a.txt").write_text("a zone")
    (tmp_path / "outdir").mkdir()
    assert run("extract", tmp_path / "a.txt", "--schema", schema_file, "-o", tmp_path / "outdir") == 2
    assert "is a folder; give a file in it" in capsys.readouterr().err
    assert not (tmp_path / "outdir.settings").exists() and not any((tmp_path / "outdir").iterdir())


def test_a_resume_knows_the_records_however_the_inputs_are_spelt(tmp_path, model_dir, schema_file, monkeypatch):
    monkeypatch.chdir(tmp_path)
    feed_of(tmp_path / "feed.jsonl", 3)
    argv = ["--schema", schema_file, "--model", model_dir, "-o", "out.jsonl", "--quiet"]
    assert run("extract", "feed.jsonl", *argv) == 0
    (tmp_path / "link.jsonl").symlink_to(tmp_path / "feed.jsonl")   # (had been read again, twice in OUT)
    for spelt in (str(tmp_path / "feed.jsonl"), "./feed.jsonl", f"../{tmp_path.name}/feed.jsonl", "link.jsonl"):
        assert run("extract", spelt, *argv, "--resume") == 0
        assert len(lines(tmp_path / "out.jsonl")) == 3, spelt
    (tmp_path / "sub").mkdir()
    monkeypatch.chdir(tmp_path / "sub")   # its sources are relative to the folder above: every record had been
    assert run("extract", "../feed.jsonl", *argv[:-2], "../out.jsonl", "--quiet", "--resume") == 2   # written again
    assert len(lines(tmp_path / "out.jsonl")) == 3
    monkeypatch.chdir(tmp_path)   # its inputs moved away and another come: no sign of another folder
    (tmp_path / "feed.jsonl").rename(tmp_path / "sub" / "done.jsonl")
    feed_of(tmp_path / "next.jsonl", 2)
    assert run("extract", "next.jsonl", *argv, "--resume") == 0 and len(lines(tmp_path / "out.jsonl")) == 5


def test_a_resume_with_other_settings_refuses(tmp_path, model_dir, schema_file, capsys, monkeypatch):
    """A resume with another schema or --min-confidence had appended records of another run."""
    feed, out = feed_of(tmp_path / "feed.jsonl", 2), tmp_path / "out.jsonl"
    argv = ["extract", feed, "--model", model_dir, "-o", out, "--quiet"]
    assert run(*argv, "--schema", schema_file) == 0
    other = tmp_path / "other.json"
    other.write_text(json.dumps({"type": "object", "properties": {"city": {"enum": ["Rome", "Oslo"]}}}))
    for changed, said in ((["--schema", other], "another --schema"),
                          (["--schema", schema_file, "--min-confidence", "0.9"],
                           "--min-confidence none (this run: 0.9)")):
        assert run(*argv, *changed, "--resume") == 2
        assert f"{out} was written with {said}; resume with the same settings" in capsys.readouterr().err
    monkeypatch.chdir(tmp_path)   # the same schema spelt another way is the same
    assert run(*argv, "--schema", "zone.schema.json", "--resume") == 0 and len(lines(out)) == 2


def test_a_second_run_on_the_same_output_refuses_and_the_lock_goes_with_the_run(tmp_path, model_dir, schema_file,
                                                                                 monkeypatch, capsys):
    feed, out = feed_of(tmp_path / "feed.jsonl", 2), tmp_path / "out.jsonl"
    argv = ["extract", feed, "--schema", schema_file, "--model", model_dir, "-o", out]
    with batch_io.OutputLock(out):
        assert run(*argv) == 2
        err = capsys.readouterr().err
        assert f"another clover-struct run (pid {os.getpid()}) is writing it" in err and len(err.splitlines()) == 1
        assert not out.exists()               # refused before it touched anything
    assert run(*argv) == 0 and len(lines(out)) == 2
    assert not (tmp_path / "out.jsonl.lock").exists() and not (tmp_path / "out.errors.jsonl.lock").exists()
    with batch_io.OutputLock(tmp_path / "out.errors.jsonl"):   # another run's OUT sharing the errors file
        assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "out.json") == 2
        assert "out.errors.jsonl: another clover-struct run" in capsys.readouterr().err
    (tmp_path / "link.jsonl").symlink_to(out)   # OUT through a link: the same lock (it had emptied OUT)
    with batch_io.OutputLock(out):
        assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "link.jsonl") == 2
        assert "another clover-struct run" in capsys.readouterr().err
    monkeypatch.setattr(batch_io, "fcntl", None)   # where there is no flock: a file created exclusively
    with batch_io.OutputLock(out):
        assert run(*argv) == 2
        assert "delete" in capsys.readouterr().err
    assert run(*argv) == 0


@pytest.mark.parametrize("damage", [b'{"source": "x", "rec', b"\0" * 37 + b"\n"])
def test_a_torn_last_line_is_cut_away_on_resume(tmp_path, model_dir, schema_file, damage):
    feed = feed_of(tmp_path / "feed.jsonl", 4)
    argv = ["extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "o.jsonl", "--quiet"]
    assert run(*argv) == 0
    ref = (tmp_path / "o.jsonl").read_bytes()
    (tmp_path / "o.jsonl").write_bytes(ref[:ref.index(b"\n") + 1] + damage)   # a power cut after the first line
    assert run(*argv, "--resume") == 0
    assert (tmp_path / "o.jsonl").read_bytes() == ref


def test_a_line_that_is_not_ours_stops_a_resume(tmp_path, model_dir, schema_file, capsys):
    feed = feed_of(tmp_path / "feed.jsonl", 2)
    (tmp_path / "o.jsonl").write_text('{"not": "ours"}\n{"source": "x", "record": {}}\n')
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "o.jsonl",
               "--resume") == 2
    assert "o.jsonl:1: not a line clover-struct wrote" in capsys.readouterr().err
    assert (tmp_path / "o.jsonl").read_text().count("\n") == 2   # left as it was
    minified = '{"api_key": "abc", "users": [1, 2, 3]}'   # one line, no line end: it had been cut away
    (tmp_path / "data.json").write_text(minified)
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "data.json",
               "--resume") == 2
    assert "data.json:1: not a line clover-struct wrote" in capsys.readouterr().err
    assert (tmp_path / "data.json").read_text() == minified


def test_setup_failures_are_one_line(tmp_path, model_dir, schema_file, monkeypatch, capsys):
    feed = feed_of(tmp_path / "feed.jsonl", 1)
    (tmp_path / "dir.jsonl").mkdir()
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir, "-o", tmp_path / "dir.jsonl") == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "dir.jsonl" in err
    (tmp_path / "bool.json").write_text('{"type": "object", "properties": {"a": false}, "required": ["a"]}')
    assert run("extract", feed, "--schema", tmp_path / "bool.json", "--model", model_dir) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and err.startswith("clover-struct: error: field `")

    (tmp_path / "leaves.py").write_text("import sys\nsys.exit('bye')\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    for argv, words in ((["--schema", tmp_path], "a folder"), (["-o", feed / "out.jsonl"], "is a file, not a folder"),
                        (["--schema", "leaves:M"], "SystemExit: bye"),
                        (["--device", "cuda"] * (not __import__("torch").cuda.is_available()), "device cpu")):
        if argv:
            assert run("extract", feed, "--schema", schema_file, "--model", model_dir, *argv) == 2
            err = capsys.readouterr().err
            assert len(err.splitlines()) == 1 and words in err, err
    bom = b"\xef\xbb\xbf" + (tmp_path / "bool.json").read_bytes().replace(b"false", b"{}")
    (tmp_path / "bom.json").write_bytes(bom)
    (tmp_path / "true.json").write_text("true")
    for schema in ("bom.json", "true.json"):
        assert run("extract", feed, "--schema", tmp_path / schema, "--model", model_dir, "-o",
                   tmp_path / "b.jsonl") == 0
    capsys.readouterr()

    def broken(spec):
        raise RuntimeError("unexpected")
    monkeypatch.setattr(cli, "load_spec", broken)
    assert run("extract", feed, "--schema", schema_file, "--model", model_dir) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and "RuntimeError: unexpected; this is a bug" in err


def stop_midway(tmp_path, common, out, sig):
    """Start the CLI as a subprocess, send `sig` once it has written a line; returns (code, stderr)."""
    proc = subprocess.Popen([sys.executable, "-m", "clover_struct.cli", *common, "-o", str(out)],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "OMP_NUM_THREADS": "1"})
    deadline = time.monotonic() + 120
    while not (out.exists() and out.read_bytes().count(b"\n") >= 1):
        assert proc.poll() is None and time.monotonic() < deadline, proc.stderr.read()
        time.sleep(0.005)
    if sig == signal.SIGTERM:   # meanwhile a second run on the same output refuses
        assert run(*common, "-o", out) == 2
    proc.send_signal(sig)
    _, err = proc.communicate(timeout=120)
    return proc.returncode, err


def check_stopped_and_resumed(tmp_path, model_dir, schema_file, sig, capsys):
    feed = feed_of(tmp_path / "feed.jsonl", 60, broken=[5])
    common = ["extract", str(feed), "--schema", schema_file, "--model", model_dir, "--batch-size", "2", "--quiet"]
    assert run(*common, "-o", tmp_path / "ref.jsonl") == 1
    out = tmp_path / "stopped.jsonl"
    code, err = stop_midway(tmp_path, common, out, sig)
    assert code == 128 + sig, err
    assert f"stopped by {sig.name}: run again with --resume" in err and "Traceback" not in err
    errors = tmp_path / "stopped.errors.jsonl"
    written = out.read_bytes() + (errors.read_bytes() if errors.exists() else b"")
    assert written.endswith(b"\n") and written.count(b"\n") % 2 == 0 and written.count(b"\n") < 60   # whole batches
    assert not (tmp_path / "stopped.jsonl.lock").exists()
    capsys.readouterr()
    assert run(*common, "-o", out, "--resume") == 1
    assert lines(out) == lines(tmp_path / "ref.jsonl")
    assert lines(tmp_path / "stopped.errors.jsonl") == lines(tmp_path / "ref.errors.jsonl")


def test_sigterm_stops_after_the_batch_and_resume_goes_on(tmp_path, model_dir, schema_file, capsys):
    check_stopped_and_resumed(tmp_path, model_dir, schema_file, signal.SIGTERM, capsys)


@pytest.mark.slow
def test_sigint_stops_after_the_batch_and_resume_goes_on(tmp_path, model_dir, schema_file, capsys):
    check_stopped_and_resumed(tmp_path, model_dir, schema_file, signal.SIGINT, capsys)
