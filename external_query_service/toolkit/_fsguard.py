"""Safe file access under one root: directory-fd-relative opens, no symlinks, no FIFOs.

Every path is relative to the root and is walked one component at a time: each folder is
opened with ``O_DIRECTORY | O_NOFOLLOW`` relative to its parent's descriptor, and the file
with ``O_NOFOLLOW | O_NONBLOCK`` relative to its folder's, then checked with ``fstat`` on
the open descriptor. So a symlink anywhere on the way is refused (not resolved), a path
cannot leave the root, and a FIFO or device is refused without blocking. Nothing read is
imported or executed. Where the platform cannot do these opens (no ``O_NOFOLLOW``, no
``dir_fd``), ``SafeRoot`` refuses to start: it fails closed rather than fall back.
"""

from __future__ import annotations

import contextlib
import errno
import os
import stat
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from ..errors import BoundaryRefused, ToolkitError, UnsafePlatform

__all__ = [
    "MAX_DEPTH",
    "FileEntry",
    "SafeRoot",
    "WalkResult",
    "check_platform",
    "split_relpath",
]

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Deepest folder nesting a walk descends into.
MAX_DEPTH = 32


def check_platform() -> None:
    """``UnsafePlatform`` unless descriptor-relative, no-follow opens are available."""
    missing = [
        name
        for name, present in (
            ("O_NOFOLLOW", hasattr(os, "O_NOFOLLOW")),
            ("O_DIRECTORY", hasattr(os, "O_DIRECTORY")),
            ("O_NONBLOCK", hasattr(os, "O_NONBLOCK")),
            ("os.open(dir_fd=)", os.open in os.supports_dir_fd),
            ("os.stat(dir_fd=)", os.stat in os.supports_dir_fd),
            ("os.mkdir(dir_fd=)", os.mkdir in os.supports_dir_fd),
            ("os.scandir(fd)", os.scandir in os.supports_fd),
        )
        if not present
    ]
    if missing:
        raise UnsafePlatform(
            "this platform cannot open files safely relative to a folder "
            f"(missing: {', '.join(missing)}); workspace tools and reports are unavailable"
        )


def split_relpath(relpath: str) -> tuple[str, ...]:
    """The components of a root-relative POSIX path; ``BoundaryRefused`` if it could
    leave the root (absolute, ``..``, NUL). ``""`` and ``"."`` name the root itself."""
    if "\x00" in relpath:
        raise BoundaryRefused(f"{relpath!r} contains NUL", reason="path_escapes_root")
    path = PurePosixPath(relpath)
    if path.is_absolute():
        raise BoundaryRefused(f"{relpath} is not relative to the root", reason="path_escapes_root")
    parts = tuple(part for part in path.parts if part != ".")
    if ".." in parts:
        raise BoundaryRefused(f"{relpath} climbs out of the root", reason="path_escapes_root")
    return parts


@dataclass(frozen=True)
class FileEntry:
    """A regular file found under the root: POSIX path relative to the root, and size."""

    relpath: str  # POSIX, relative to the root
    size: int


@dataclass
class WalkResult:
    """Regular files found, and everything left out, counted by reason."""

    files: list[FileEntry] = field(default_factory=list)
    symlinks_refused: int = 0
    non_regular_skipped: int = 0
    hidden_skipped: int = 0
    unreadable: int = 0
    files_omitted: int = 0
    too_deep: int = 0

    def omissions(self) -> dict[str, int]:
        """What the walk left out, by reason (only non-zero counts)."""
        counts = {
            "symlinks_refused": self.symlinks_refused,
            "non_regular_skipped": self.non_regular_skipped,
            "hidden_skipped": self.hidden_skipped,
            "unreadable": self.unreadable,
            "files_omitted": self.files_omitted,
            "too_deep": self.too_deep,
        }
        return {key: value for key, value in counts.items() if value}


def _classify_failure(name: str, parent: int, exc: OSError, shown: str) -> ToolkitError:
    """Turn a failed no-follow open into the refusal it stands for."""
    try:
        info = os.stat(name, dir_fd=parent, follow_symlinks=False)
    except FileNotFoundError:
        return ToolkitError(f"{shown} does not exist", reason="not_found")
    except OSError:
        return ToolkitError(f"{shown}: {exc.strerror}", reason="unreadable")
    if stat.S_ISLNK(info.st_mode):
        return BoundaryRefused(f"{shown} is a symlink", reason="symlink_refused")
    if exc.errno == errno.ENOTDIR:
        return BoundaryRefused(f"{shown} is not a folder", reason="not_a_directory")
    return ToolkitError(f"{shown}: {exc.strerror}", reason="unreadable")


class SafeRoot:
    """One folder that every access stays inside (see the module docstring).

    The root itself is resolved once, when constructed (an operator may name it through a
    symlink); below it nothing is followed. If the folder at that path is later replaced,
    every access is refused (``root_changed``).
    """

    def __init__(self, root: str | Path) -> None:
        check_platform()
        try:
            resolved = Path(root).resolve(strict=True)
        except (OSError, RuntimeError) as exc:
            raise ToolkitError(
                f"root {root} cannot be opened: {exc}", reason="root_missing"
            ) from None
        if not resolved.is_dir():
            raise ToolkitError(f"root {root} is not a folder", reason="root_not_directory")
        self.path = resolved
        info = resolved.stat()
        self._identity = (info.st_dev, info.st_ino)

    # -- descriptors ----------------------------------------------------------------------
    @contextlib.contextmanager
    def _root_fd(self) -> Iterator[int]:
        try:
            fd = os.open(self.path, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC)
        except OSError as exc:
            if exc.errno in (errno.ENOENT, errno.ELOOP, errno.EMLINK, errno.ENOTDIR):
                # Gone, or replaced by a symlink or a file: not the folder we resolved.
                raise BoundaryRefused(
                    f"the root {self.path.name} was removed or replaced", reason="root_changed"
                ) from None
            raise ToolkitError(
                f"the root {self.path.name}: {exc.strerror}", reason="unreadable"
            ) from None
        try:
            info = os.fstat(fd)
            if (info.st_dev, info.st_ino) != self._identity:
                raise BoundaryRefused(
                    f"the root {self.path.name} was replaced", reason="root_changed"
                )
            yield fd
        finally:
            os.close(fd)

    def _open_child_dir(self, parent: int, name: str, shown: str) -> int:
        try:
            return os.open(
                name, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC, dir_fd=parent
            )
        except OSError as exc:
            raise _classify_failure(name, parent, exc, shown) from None

    @contextlib.contextmanager
    def open_dir(self, parts: tuple[str, ...], *, create: bool = False) -> Iterator[int]:
        """A descriptor of the folder ``parts`` names, walked component by component;
        with ``create``, missing folders are made (never through a symlink)."""
        with self._root_fd() as root_fd:
            fd = os.dup(root_fd)
            try:
                for index, name in enumerate(parts):
                    shown = "/".join(parts[: index + 1])
                    if create:
                        with contextlib.suppress(FileExistsError):
                            os.mkdir(name, 0o755, dir_fd=fd)
                    child = self._open_child_dir(fd, name, shown)
                    os.close(fd)
                    fd = child
                yield fd
            finally:
                os.close(fd)

    @contextlib.contextmanager
    def open_file(self, relpath: str) -> Iterator[tuple[int, os.stat_result]]:
        """A read-only descriptor of the regular file ``relpath`` and its ``fstat``."""
        parts = split_relpath(relpath)
        if not parts:
            raise BoundaryRefused("the root is a folder, not a file", reason="not_regular_file")
        with self.open_dir(parts[:-1]) as folder:
            flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC
            try:
                fd = os.open(parts[-1], flags, dir_fd=folder)
            except OSError as exc:
                raise _classify_failure(parts[-1], folder, exc, relpath) from None
            try:
                info = os.fstat(fd)
                if not stat.S_ISREG(info.st_mode):
                    raise BoundaryRefused(
                        f"{relpath} is not a regular file", reason="not_regular_file"
                    )
                yield fd, info
            finally:
                os.close(fd)

    # -- reading ----------------------------------------------------------------------------
    def read_bytes(self, relpath: str, max_bytes: int) -> bytes:
        """The file's bytes; ``ToolkitError(reason="file_too_large")`` above ``max_bytes``."""
        with self.open_file(relpath) as (fd, info):
            if info.st_size > max_bytes:
                raise ToolkitError(
                    f"{relpath} has {info.st_size} bytes, more than {max_bytes}",
                    reason="file_too_large",
                )
            data = _read_upto(fd, max_bytes + 1)
        if len(data) > max_bytes:
            raise ToolkitError(f"{relpath} grew past {max_bytes} bytes", reason="file_too_large")
        return data

    def walk(self, under: str = "", *, max_files: int) -> WalkResult:
        """Regular files below ``under`` (sorted, depth first), hidden names skipped,
        symlinks and other non-regular entries refused and counted, at most ``max_files``."""
        result = WalkResult()
        parts = split_relpath(under)
        with self.open_dir(parts) as start:
            self._walk(os.dup(start), parts, result, max_files, depth=0)
        return result

    def _walk(
        self, fd: int, parts: tuple[str, ...], result: WalkResult, max_files: int, depth: int
    ) -> None:
        try:
            with os.scandir(fd) as scan:
                entries = sorted(scan, key=lambda entry: entry.name)
            for entry in entries:
                relpath = "/".join((*parts, entry.name))
                if entry.name.startswith("."):
                    result.hidden_skipped += 1
                elif entry.is_symlink():
                    result.symlinks_refused += 1
                elif entry.is_dir(follow_symlinks=False):
                    if depth + 1 >= MAX_DEPTH:
                        result.too_deep += 1
                        continue
                    try:
                        child = self._open_child_dir(fd, entry.name, relpath)
                    except BoundaryRefused:
                        result.symlinks_refused += 1  # swapped for a link after the scan
                        continue
                    except ToolkitError:
                        result.unreadable += 1
                        continue
                    self._walk(child, (*parts, entry.name), result, max_files, depth + 1)
                elif entry.is_file(follow_symlinks=False):
                    if len(result.files) >= max_files:
                        result.files_omitted += 1
                        continue
                    try:
                        size = entry.stat(follow_symlinks=False).st_size
                    except OSError:
                        result.unreadable += 1
                        continue
                    result.files.append(FileEntry(relpath, size))
                else:
                    result.non_regular_skipped += 1
        except OSError:
            result.unreadable += 1
        finally:
            os.close(fd)

    # -- writing ----------------------------------------------------------------------------
    def create_new(self, relpath: str, data: bytes) -> None:
        """Write ``data`` to a NEW file (``O_EXCL``; folders made as needed). An existing
        file — or a symlink, even a dangling one — is refused with reason ``output_exists``."""
        parts = split_relpath(relpath)
        if not parts:
            raise BoundaryRefused("the output names the folder itself", reason="not_regular_file")
        with self.open_dir(parts[:-1], create=True) as folder:
            flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC
            try:
                fd = os.open(parts[-1], flags, 0o644, dir_fd=folder)
            except FileExistsError:
                raise BoundaryRefused(
                    f"{relpath} already exists; reports are never overwritten",
                    reason="output_exists",
                ) from None
            except OSError as exc:
                raise ToolkitError(f"{relpath}: {exc.strerror}", reason="unwritable") from None
            try:
                view = memoryview(data)
                while view:
                    written = os.write(fd, view)
                    view = view[written:]
                os.fsync(fd)
            finally:
                os.close(fd)


def _read_upto(fd: int, limit: int) -> bytes:
    parts: list[bytes] = []
    total = 0
    while total < limit:
        block = os.read(fd, min(65536, limit - total))
        if not block:
            break
        parts.append(block)
        total += len(block)
    return b"".join(parts)
