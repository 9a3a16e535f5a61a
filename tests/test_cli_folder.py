"""`clover-struct extract` on a folder of 100 files, good and bad mixed, with the embedded model:
every file is a record or an error row, no traceback, and the good files come out exactly as
from a run over the good files alone."""

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import pytest

FIRS = {"EGTT": ["EGLL", "EGKK", "EGSS"], "ZSHA": ["ZSSS", "ZSPD"], "LFFF": ["LFPG", "LFPO"], "EDGG": ["EDDF"],
        "KZNY": ["KJFK"], "RJJJ": ["RJTT", "RJAA"]}
SUBJECTS = [("QRTCA", "TEMPORARY RESTRICTED AREA ACTIVE"), ("QWULW", "UAS FLIGHTS PROHIBITED"),
            ("QOBCE", "CRANE ERECTED"), ("QMRLC", "RWY 09L/27R CLOSED"), ("QRDCA", "DANGER AREA ACTIVATED"),
            ("QWPLW", "PARACHUTE JUMPING EXERCISE")]


def notice(rng: random.Random) -> str:
    """A notice in the ICAO layout, drawn at random (written here, not taken from any data set)."""
    fir = rng.choice(sorted(FIRS))
    code, subject = rng.choice(SUBJECTS)
    lat, lon = rng.randint(0, 89), rng.randint(0, 179)
    lo, hi = sorted(rng.sample(range(0, 250, 5), 2))
    start = f"{rng.randint(24, 29):02d}{rng.randint(1, 12):02d}{rng.randint(1, 28):02d}{rng.randint(0, 23):02d}00"
    end = "PERM" if rng.random() < 0.2 else start[:6] + f"{rng.randint(0, 23):02d}30"
    head = rng.choice("ABCD") + f"{rng.randint(1, 9999):04d}/{start[:2]}"
    lines = [f"{head} NOTAMN",
             f"Q) {fir}/{code}/IV/BO/W/{lo:03d}/{hi:03d}/{lat:02d}{rng.randint(0, 59):02d}{rng.choice('NS')}"
             f"{lon:03d}{rng.randint(0, 59):02d}{rng.choice('EW')}{rng.randint(1, 25):03d}",
             f"A) {rng.choice(FIRS[fir])} B) {start} C) {end}",
             f"E) {subject}."]
    if rng.random() < 0.7:
        lines.append(f"F) {rng.choice(['SFC', 'GND'])} G) {rng.choice([f'FL{hi:03d}', f'{hi * 100}FT AMSL'])}")
    text = "\n".join(lines)
    return text if rng.random() < 0.8 else text.replace("\n", " ")


def bad_files(rng: random.Random) -> dict[str, bytes | None]:
    """50 files that cannot give a record, or are not what a notice looks like: None is a FIFO."""
    out: dict[str, bytes | None] = {}
    for n in range(8):
        out[f"bin{n}.txt"] = bytes(rng.randrange(256) for _ in range(rng.randint(10, 4000)))
    out["png.md"] = b"\x89PNG\r\n\x1a\n" + bytes(100)
    for n in range(6):
        out[f"empty{n}.txt"] = rng.choice([b"", b" ", b"\n\n", b"\t \r\n", b"\xef\xbb\xbf", b"   \n  "])
    for n in range(10):   # garbage that is text: any Unicode, control characters, bidi marks
        chars = [chr(rng.choice([rng.randint(1, 0x7F), rng.randint(0x80, 0xD7FF), rng.randint(0xE000, 0x10FFFF),
                                 0x202E, 0x200F, 0xFEFF, 0x1B])) for _ in range(rng.randint(1, 400))]
        out[f"garbage{n}.txt"] = "".join(chars).encode("utf-8", "surrogatepass")
    for n in range(6):
        out[f"latin{n}.txt"] = "ÉTÉ ZONE INTERDITE À L'AÉROPORT".encode("latin-1")
    for n in range(6):   # notices cut short, case changed, half their lines
        text = notice(rng)
        out[f"broken{n}.txt"] = rng.choice([text[:rng.randint(1, 40)], text.lower(), text.swapcase(),
                                            "\n".join(text.splitlines()[::2])]).encode()
    out["huge.txt"] = b"A1234/26 NOTAMN " * 330_000          # 5.3 MB: refused unread
    out["long.txt"] = notice(rng).encode() * 400            # longer than the model's context
    out["nul.txt"] = b"A1234/26 NOTAMN\0Q) EGTT"
    out["utf16.txt"] = "A1234/26 NOTAMN\nQ) EGTT/QRTCA".encode("utf-16")
    out["dangling.txt"] = b"-> gone.txt"                     # made a dangling link below
    out["fifo.txt"] = None
    out["mixed.md"] = "禁止无人机飞行 A1234/26 Запрет 🚁 \u202eNOTAMN".encode()
    out["json.txt"] = b'{"text": "not a JSONL file, a text file holding JSON"}'
    out["nested.md"] = b"[" * 5000
    out["sql.txt"] = b"'; DROP TABLE notams; --"
    out["escape.txt"] = b"\x1b[2J\x1b[31mRED\x07"
    out["control.txt"] = bytes(range(1, 32))
    out["one.txt"] = b"A"
    assert len(out) == 50
    return out


def write_folder(folder: Path, good: dict[str, str], bad: dict[str, bytes | None]):
    folder.mkdir()
    for name, text in good.items():
        (folder / name).write_text(text, encoding="utf-8")
    for name, data in bad.items():
        if data is None:
            os.mkfifo(folder / name)
        elif name.endswith("dangling.txt"):
            (folder / name).symlink_to(folder / "gone.txt")
        else:
            (folder / name).write_bytes(data)


def extract(folder: Path, out: Path) -> tuple[int, str]:
    proc = subprocess.run([sys.executable, "-m", "clover_struct.cli", "extract", str(folder), "--schema",
                           "clover_struct.schemas.notam:Notam", "-o", str(out), "--batch-size", "8"],
                          capture_output=True, text=True, timeout=900,
                          env={**os.environ, "OMP_NUM_THREADS": "1"})   # on a busy machine, two threads crawl
    return proc.returncode, proc.stderr


def rows(path: Path, folder: Path) -> dict[str, dict]:
    if not path.exists():
        return {}
    return {(r := json.loads(line))["source"].removeprefix(f"{folder}/"): r for line in path.read_text().splitlines()}


@pytest.mark.slow
def test_a_folder_of_good_and_bad_files(tmp_path):
    rng = random.Random(34)
    good = {f"notice{n:02d}.{'txt' if n % 3 else 'md'}": notice(rng) for n in range(50)}
    bad = bad_files(rng)
    names = sorted(good) + sorted(bad)
    rng.shuffle(names)   # interleaved, so bad files sit between good ones in every batch
    renamed = {name: f"{k:03d}-{name}" for k, name in enumerate(names)}
    write_folder(tmp_path / "mixed", {renamed[k]: v for k, v in good.items()},
                 {renamed[k]: v for k, v in bad.items()})
    write_folder(tmp_path / "clean", {renamed[k]: v for k, v in good.items()}, {})

    code, err = extract(tmp_path / "mixed", tmp_path / "mixed.jsonl")
    assert code == 1 and "Traceback" not in err and len(err.strip().splitlines()) == 1, err
    records = rows(tmp_path / "mixed.jsonl", tmp_path / "mixed")
    errors = rows(tmp_path / "mixed.errors.jsonl", tmp_path / "mixed")
    assert not set(records) & set(errors) and set(records) | set(errors) == set(renamed.values())
    assert not any("a bug in clover-struct" in row["error"] for row in errors.values())
    for name in ("bin0.txt", "png.md", "empty0.txt", "latin0.txt", "huge.txt", "long.txt", "nul.txt",
                 "dangling.txt", "fifo.txt", "nested.md"):
        assert renamed[name] in errors, name
    assert "not read" in errors[renamed["huge.txt"]]["error"] and "tokens" in errors[renamed["long.txt"]]["error"]

    code, err = extract(tmp_path / "clean", tmp_path / "clean.jsonl")
    assert "Traceback" not in err
    clean = {**rows(tmp_path / "clean.jsonl", tmp_path / "clean"), **rows(tmp_path / "clean.errors.jsonl",
                                                                          tmp_path / "clean")}
    mixed = {name: row for name, row in {**records, **errors}.items() if name in clean}
    assert sorted(mixed) == sorted(renamed[k] for k in good)
    assert {k: {**v, "source": k} for k, v in mixed.items()} == {k: {**v, "source": k} for k, v in clean.items()}
    assert sum("record" in r for r in clean.values()) >= 40   # the good files are mostly read
