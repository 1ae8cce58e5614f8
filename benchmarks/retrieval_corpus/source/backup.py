"""Nightly backup of the photo library to the external drive.

Run from cron at 2 am: copies new and changed files, keeps seven daily snapshots and
deletes older ones, and writes a line to backup.log with the number of files copied."""
import hashlib
import shutil
import sys
import time
from pathlib import Path

SOURCE = Path.home() / "Pictures"
DESTINATION = Path("/mnt/backup/photos")
KEEP_SNAPSHOTS = 7


def file_digest(path: Path) -> str:
    """SHA-256 of a file, read in one-megabyte blocks so large videos do not fill memory."""
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def changed_files(source: Path, previous: Path):
    """Files under source that are missing from the previous snapshot or differ from it."""
    for path in source.rglob("*"):
        if not path.is_file():
            continue
        old = previous / path.relative_to(source)
        if not old.exists() or old.stat().st_size != path.stat().st_size \
                or file_digest(old) != file_digest(path):
            yield path


def prune_snapshots(destination: Path, keep: int = KEEP_SNAPSHOTS) -> None:
    """Deletes the oldest snapshot folders so only `keep` remain."""
    snapshots = sorted(p for p in destination.iterdir() if p.is_dir())
    for old in snapshots[:-keep]:
        shutil.rmtree(old)


def main() -> int:
    if not DESTINATION.exists():
        print("backup drive is not mounted", file=sys.stderr)
        return 1
    today = DESTINATION / time.strftime("%Y-%m-%d")
    snapshots = sorted(p for p in DESTINATION.iterdir() if p.is_dir())
    previous = snapshots[-1] if snapshots else today
    copied = 0
    for path in changed_files(SOURCE, previous):
        target = today / path.relative_to(SOURCE)
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path, target)
        copied += 1
    prune_snapshots(DESTINATION)
    with open(DESTINATION / "backup.log", "a") as log:
        log.write(f"{time.ctime()} copied {copied} files\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
