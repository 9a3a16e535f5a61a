"""The files of `clover-struct extract`: inputs read as records, outputs written as JSON lines.

- `roots`, `files`: the INPUT arguments (files, folders walked recursively, globs) as
  files in order, each once.
- `records`: every text file and every JSONL line as (source, text, why-not), streamed:
  one file open at a time, a line at a time, a text over MAX_TEXT_BYTES refused without
  being read whole. Anything that cannot be read (binary, not UTF-8, not a regular file,
  unreadable, bad JSON) is a record with its reason, never an exception.
- `Sink`: JSON lines appended with one write call per line and fsync'ed on `sync()`.
- `done_sources`: what an earlier run wrote, for --resume; a torn last line (a write cut
  short by a kill or a power cut) is cut away.
- `OutputLock`: one run per output file at a time (an advisory lock on OUT.lock that the
  system releases however the run ends).

Knows nothing of models, schemas or extraction.
"""

from __future__ import annotations

import codecs
import contextlib
import glob
import itertools
import json
import os
import stat
from pathlib import Path

from .errors import UsageError

try:
    import fcntl
except ImportError:   # no fcntl (Windows): the lock is a file created exclusively
    fcntl = None

LINES = (".jsonl", ".ndjson")          # JSON lines: a record per line (suffixes read in any case)
SUFFIXES = (".txt", ".md", *LINES)    # what a directory contributes
COUNT_BYTES = 64 << 20                 # count records for an ETA only below this much JSONL
MAX_TEXT_BYTES = 4 << 20               # a longer text (file or JSONL line) is refused unread: no context holds it


class CliError(UsageError):
    """A mistake on the command line; the CLI prints it as one line and exits 2."""


def roots(inputs: list[str]) -> list[Path]:
    """Each INPUT as paths (a glob expanded, sorted); FileNotFoundError for one that names nothing."""
    out = []
    for s in inputs:
        if s == "-":
            raise FileNotFoundError("-: standard input is not read; save the texts to a file (one named - is ./-)")
        if os.path.lexists(s):
            out.append(Path(s))
        elif any(c in s for c in "*?["):
            found = sorted(glob.glob(s, recursive=True))
            if not found:
                raise FileNotFoundError(f"{s}: no file matches this pattern")
            out += map(Path, found)
        else:
            raise FileNotFoundError(f"{s}: no such file or directory")
    return out


def files(paths: list[Path], exclude=()):
    """Files in order, each once: directories walked recursively, sorted, hidden entries skipped.
    A folder that cannot be listed, or holds no file to read, is itself in the list (records
    says why it gives nothing)."""
    seen = {os.path.realpath(p) for p in exclude}
    for f in itertools.chain.from_iterable(_walk(p) if p.is_dir() else [p] for p in paths):
        if os.path.realpath(f) not in seen:   # (a file reached through two links is read once)
            seen.add(os.path.realpath(f))
            yield f


def _walk(root: Path):
    """The files to read under `root`, links to folders followed once; a folder that cannot be
    listed, and `root` where it holds none, as themselves."""
    failed, found, visited = [], False, set()
    for folder, dirs, names in os.walk(root, onerror=failed.append, followlinks=True):
        visited.add(os.path.realpath(folder))
        dirs[:] = sorted(d for d in dirs if not d.startswith(".") and os.path.realpath(Path(folder, d)) not in visited)
        for n in sorted(names):
            if n.lower().endswith(SUFFIXES) and not n.startswith("."):
                found = True
                yield Path(folder, n)
        while failed:
            yield Path(failed.pop(0).filename)
    if not found:
        yield root


def records(paths, text_field: str, truncate: bool = False):
    """(source, text, why) for each record, streamed; `why` says why a record cannot be read (text
    None). `truncate`: a text file past MAX_TEXT_BYTES is read to there (no context holds more)."""
    for path in paths:
        try:
            info = path.stat()
            if stat.S_ISDIR(info.st_mode):   # (files lists a folder that gives nothing)
                os.scandir(path).close()
                yield str(path), None, f"the folder holds no file to read ({', '.join(SUFFIXES)}; hidden ones skipped)"
                continue
            if not stat.S_ISREG(info.st_mode):
                yield str(path), None, "not a regular file (a pipe, device or socket); give text files"
                continue
            if json_lines(path):
                with open(path, "rb") as f:
                    head = f.read(4096)   # UTF-16 with its byte order mark, or without
                    bare = b"\0" in head and _utf16_order(head[:len(head) & ~1])
                    if head.startswith((b"\xff\xfe", b"\xfe\xff")) or bare:
                        yield str(path), None, "JSON lines in UTF-16: convert the file to UTF-8 (iconv -t UTF-8)"
                        continue
                    f.seek(0)
                    records = 0
                    for n, raw in _lines(f):
                        raw = raw.removeprefix(codecs.BOM_UTF8) if n == 1 and raw else raw   # Notepad's mark
                        if raw is None:
                            yield f"{path}:{n}", None, f"the line is over {_size(MAX_TEXT_BYTES)}; split it"
                        elif raw.strip():
                            yield (f"{path}:{n}", *_line_text(raw, text_field))
                        records += _a_record(raw)
                    if not records:   # a row says so: the file is not passed over in silence
                        yield str(path), None, "the file holds no JSON line (it is empty or blank): nothing to extract"
                continue
            if info.st_size > MAX_TEXT_BYTES and not truncate:
                yield (str(path), None, f"the file is {_size(info.st_size)}; texts over {_size(MAX_TEXT_BYTES)} "
                                        "are not read (no model's context holds one); split it, or pass --truncate")
                continue
            with open(path, "rb") as f:
                data = f.read(MAX_TEXT_BYTES + 1)
            if len(data) > MAX_TEXT_BYTES:
                data = _whole_characters(data[:MAX_TEXT_BYTES])
        except OSError as e:
            yield str(path), None, f"cannot read it: {e.strerror or e}"
            continue
        text, why = _file_text(data)
        if text is not None and (kind := _many_records(path, text)):
            text, why = None, (f"{kind} holds many records, which are not split here: write them as JSON lines "
                               "(.jsonl, an object a line, the text under --text-field)")
        yield str(path), text, why


def _many_records(path: Path, text: str) -> str | None:
    """"a CSV file" or "a JSON array" where a file named as one text is a table of records."""
    if path.suffix.lower() in (".csv", ".tsv"):
        return "a CSV file"
    if path.suffix.lower() == ".json" and text.lstrip().startswith("["):
        try:
            rows = json.loads(text)
        except ValueError:
            return None
        return "a JSON array" if rows and all(isinstance(r, dict) for r in rows) else None
    return None


def json_lines(path: Path) -> bool:
    return path.suffix.lower() in LINES


def _size(n: int) -> str:
    return f"{n / 2**20:.1f} MB" if n >= 2**20 else f"{n:,} bytes"


def _lines(f):
    """(line number, bytes) per line; None for a line over MAX_TEXT_BYTES, which is skipped unread."""
    for n in itertools.count(1):
        raw = f.readline(MAX_TEXT_BYTES + 1)
        if not raw:
            return
        if len(raw) > MAX_TEXT_BYTES and not raw.endswith(b"\n"):
            while (rest := f.readline(1 << 20)) and not rest.endswith(b"\n"):
                pass
            raw = None
        yield n, raw


def _a_record(line: bytes | None) -> bool:
    """Whether a JSON lines line is a record (one over the size limit too); a blank one is none."""
    return line is None or bool(line.strip())


def _whole_characters(data: bytes) -> bytes:
    """Text `data` (UTF-8, or UTF-16 after its byte order mark) cut short, without the part of a
    character the cut split."""
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        data = data[:len(data) // 2 * 2]
        unit = int.from_bytes(data[-2:], "little" if data.startswith(b"\xff\xfe") else "big")
        return data[:-2] if 0xD800 <= unit < 0xDC00 else data   # a pair's first half, without its second
    for back in range(1, min(4, len(data)) + 1):   # the last character's first byte is at most 4 from the end
        lead = data[-back]
        if lead & 0xC0 != 0x80:   # not a continuation byte
            size = 1 if lead < 0x80 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4
            return data if size <= back else data[:-back]
    return data


def _file_text(data: bytes) -> tuple[str | None, str | None]:
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):      # UTF-16 with its byte order mark
        try:
            text = data.decode("utf-16")
        except UnicodeDecodeError:
            return None, "not valid UTF-16 text after its byte order mark"
        return (None, "binary file (NUL characters after a UTF-16 byte order mark); only text files can be "
                      "read") if "\0" in text else (text, None)
    if b"\0" in data:
        if order := _utf16_order(data):
            return None, f"UTF-16 text without a byte order mark; convert it to UTF-8 (iconv -f UTF-16{order} -t UTF-8)"
        return None, "binary file (NUL bytes); only text files can be read"
    try:
        return data.decode("utf-8-sig"), None
    except UnicodeDecodeError:
        return None, ("not UTF-8 text: a binary file, or text in another encoding (convert it to UTF-8, e.g. "
                      "iconv -f LATIN1 -t UTF-8)")


def _utf16_order(data: bytes) -> str | None:
    """"LE" or "BE" where `data` holding NULs reads as UTF-16 text without a byte order mark: its
    NULs at one parity alone (the high bytes of ASCII characters), decoding to printable text."""
    even, odd = data[0::2].count(0), data[1::2].count(0)
    if min(even, odd) > 0:
        return None
    order = "LE" if odd else "BE"
    try:
        text = data.decode(f"utf-16-{order.lower()}")
    except UnicodeDecodeError:
        return None
    return order if all(c.isprintable() or c in "\t\r\n" for c in text) else None


def _line_text(raw: bytes, field: str):
    try:
        line = raw.decode("utf-8")
    except UnicodeDecodeError:
        return None, "the line is not UTF-8 text (convert the file to UTF-8, e.g. iconv -f LATIN1 -t UTF-8)"
    if "\0" in line:
        return None, "the line holds NUL bytes: binary data, not a JSON line"
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as e:
        return None, f"invalid JSON line ({e})"
    except RecursionError:
        return None, "invalid JSON line (nested too deeply)"
    except ValueError:   # (json's own errors are ValueErrors too, caught above)
        return None, "the line holds a number of more digits than Python reads (4300); write it as a string"
    if not isinstance(obj, dict):
        return None, "the line is not a JSON object"
    if field not in obj:
        return None, f"no `{field}` field; name the text field with --text-field"
    if not isinstance(obj[field], str):
        return None, f"field `{field}` is {type(obj[field]).__name__}, not a string"
    try:
        obj[field].encode("utf-8")
    except UnicodeEncodeError as e:
        return None, (f"field `{field}` holds a lone surrogate ({obj[field][e.start]!r}: an escape such as \\ud83d "
                      "without its pair), which no text holds; fix the line")
    return obj[field], None


def count(paths: list[Path], exclude) -> int | None:
    """Records in the input when that is cheap to know (for an ETA), else None."""
    n, budget = 0, COUNT_BYTES
    for f in files(paths, exclude):
        if not json_lines(f):
            n += 1
            continue
        try:
            if not f.is_file():
                n += 1
                continue
            if (budget := budget - f.stat().st_size) < 0:
                return None
            with open(f, "rb") as h:
                n += max(1, sum(_a_record(line) for _, line in _lines(h)))   # (none: a row says so)
        except OSError:
            n += 1   # an unreadable file is one (failed) record
    return n


def json_line(obj: dict) -> str:
    """One JSON line. A lone surrogate (a file name that is not UTF-8) is written as its JSON
    escape, which reads back as the same string."""
    return json.dumps(obj, ensure_ascii=False).encode("utf-8", "backslashreplace").decode("utf-8") + "\n"


class Sink:
    """JSON lines to a file (opened at the first line; one write call per line, fsync on
    sync()) or, without a path, to a stream (flushed on sync())."""

    def __init__(self, path: Path | None, stream):
        self.path, self.stream, self.fd = path, stream, None

    def write(self, obj: dict) -> None:
        line = json_line(obj)
        if self.path is None:
            with self._stream_errors():
                try:
                    return self.stream.write(line)
                except UnicodeEncodeError:   # a stream in another encoding (Windows' cp1252 when redirected)
                    return self.stream.write(json.dumps(obj) + "\n")   # the same JSON, in \u escapes
        if self.fd is None:
            created = not self.path.exists()
            self.fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            if created:   # the new name itself survives a power cut
                _sync_directory(self.path.parent)
        data = line.encode("utf-8")
        try:
            while data:   # one call; more only after a short write
                data = data[os.write(self.fd, data):]
        except OSError as e:   # a full disk: what is written is whole lines but a torn last one
            raise CliError(f"{self.path}: cannot write ({e.strerror or e}); free space, then run again with "
                           "--resume") from e

    def sync(self) -> None:
        if self.fd is not None:
            os.fsync(self.fd)
        elif self.path is None:
            with self._stream_errors():
                self.stream.flush()

    @contextlib.contextmanager
    def _stream_errors(self):
        try:
            yield
        except BrokenPipeError:   # `| head`: the CLI stops quietly
            raise
        except OSError as e:   # stdout on a full disk, say
            name = getattr(self.stream, "name", "the output stream")
            raise CliError(f"{name}: cannot write ({e.strerror or e}); give -o OUT in a folder with room") from e

    def close(self) -> None:
        if self.fd is not None:
            os.close(self.fd)
            self.fd = None


def _sync_directory(folder: Path) -> None:
    try:
        fd = os.open(folder, os.O_RDONLY)
    except OSError:
        return   # not every system opens directories
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def written_here(path: Path) -> bool:
    """Whether `path` is empty or starts with a line clover-struct writes (its source, and a
    record or an error): a file another run may empty."""
    with open(path, "rb") as f:
        first = f.readline()
    if not first.strip():
        return True
    try:
        line = json.loads(first)
    except ValueError:
        return False
    return isinstance(line, dict) and "source" in line and ("record" in line or "error" in line)


_OURS = b'{"source": '   # how every line clover-struct writes begins


def done_sources(path: Path) -> tuple[set[str], int]:
    """Sources already in a JSON-lines file, and its line count. A torn tail is truncated away:
    a trailing partial line (a write cut short), or a last line holding NUL bytes or bytes that
    are not UTF-8 (a block a power cut left unwritten). Any other line that is not ours stops
    the run: the file is not an output of clover-struct."""
    if not path.exists():
        return set(), 0
    seen, end, lines = set(), 0, 0
    with open(path, "r+b") as f:
        for line in f:
            if not line.endswith(b"\n"):
                if not (line.startswith(_OURS) or _OURS.startswith(line) or line.strip(b"\0") == b""):
                    raise CliError(f"{path}:{lines + 1}: not a line clover-struct wrote (its last line, with no "
                                   "line end); resume only into the output of an earlier run")
                break   # (one of ours a write cut short)
            try:
                seen.add(json.loads(line)["source"])
            except (json.JSONDecodeError, UnicodeDecodeError, KeyError, TypeError) as e:
                torn = b"\0" in line or isinstance(e, UnicodeDecodeError)
                if torn and not f.read(1):
                    break
                raise CliError(f"{path}:{lines + 1}: not a line clover-struct wrote ({e}); "
                               "resume only into the output of an earlier run") from e
            end, lines = end + len(line), lines + 1
        f.truncate(end)
    return seen, lines


class OutputLock:
    """Held while a run writes OUT: a second run on the same OUT refuses (CliError). An
    advisory lock (flock) on OUT.lock, which the system drops when the holder ends, however
    it ends; the file holds the holder's pid and is removed on release."""

    def __init__(self, out: Path):
        self.out, self.path, self.fd = out, self.of(out), None

    @staticmethod
    def of(out: Path) -> Path:
        """OUT's lock file, beside the file OUT is (OUT reached through a link is the same OUT)."""
        real = Path(os.path.realpath(out))
        return real.with_name(real.name + ".lock")

    def __enter__(self):
        if fcntl is None:
            return self._create_exclusively()
        while True:
            fd = self._open(os.O_RDWR | os.O_CREAT)
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip() or "?"
                os.close(fd)
                raise CliError(f"{self.out}: another clover-struct run (pid {holder}) is writing it; wait for it "
                               "to end, or write to another -o") from None
            try:
                if os.fstat(fd).st_ino == os.stat(self.path).st_ino:
                    break   # the file we locked is still the one at the path (no release removed it meanwhile)
            except FileNotFoundError:
                pass
            os.close(fd)
        self.fd = fd
        self._note_pid()
        return self

    def _create_exclusively(self):
        try:
            self.fd = self._open(os.O_WRONLY | os.O_CREAT | os.O_EXCL)
        except FileExistsError:
            raise CliError(f"{self.out}: another clover-struct run is writing it ({self.path} exists); wait for "
                           f"it to end, or, if no run is (one that crashed), delete {self.path}") from None
        self._note_pid()
        return self

    def _open(self, flags: int) -> int:
        try:
            return os.open(self.path, flags, 0o644)
        except (FileExistsError, BlockingIOError):
            raise
        except OSError as e:
            raise CliError(f"-o {self.out}: its lock {self.path.name} cannot be made there ({e.strerror or e}); give "
                           "an OUT in a folder you may write") from e

    def _note_pid(self) -> None:
        """The holder's pid in the lock, for the message of a run refused (a full disk leaves it out)."""
        try:
            os.ftruncate(self.fd, 0)
            os.write(self.fd, f"{os.getpid()}\n".encode())
        except OSError:
            pass

    def __exit__(self, *exc):
        self.path.unlink(missing_ok=True)   # while still held, so no other run holds this file
        os.close(self.fd)
        self.fd = None
