"""File I/O shared by every command: YAML that remembers line numbers, and atomic writes.

Line numbers let every validation error say `file:line: what is wrong`;
atomic writes mean a crash or Ctrl-C never leaves a half-written file.
"""

from __future__ import annotations

import os
import stat
from functools import lru_cache
from pathlib import Path

from .errors import located

# PyYAML is imported when YAML is read, not here: `cudabox check` writes its results with write_atomic on
# bare GPU nodes that have no PyYAML.


class Node(dict):
    """A YAML mapping that knows the line of itself and of each key."""

    line: int = 0
    key_lines: dict

    def line_of(self, key) -> int:
        return self.key_lines.get(key, self.line)


class Seq(list):
    """A YAML sequence that knows its own line and the line of each item."""

    line: int = 0
    item_lines: list

    def line_of(self, index: int) -> int:
        return self.item_lines[index] if index < len(self.item_lines) else self.line


class Number(float):
    """An unquoted YAML number that keeps its text: `python: 3.10` means "3.10", not 3.1."""

    text: str = ""

    def __str__(self) -> str:
        return self.text or float.__repr__(self)


def _construct_float(loader, node):
    value = Number(loader.construct_yaml_float(node))
    value.text = str(node.value)
    return value


def _construct_mapping(loader, node):
    import yaml

    mapping = Node()
    mapping.line = node.start_mark.line + 1
    mapping.key_lines = {}
    loader.flatten_mapping(node)
    for key_node, value_node in node.value:
        key = loader.construct_object(key_node, deep=True)
        if not isinstance(key, (str, int, float, bool)) or key is None:
            raise yaml.constructor.ConstructorError(
                None, None, "mapping keys must be plain scalars", key_node.start_mark)
        if key in mapping:
            raise yaml.constructor.ConstructorError(
                None, None, f"duplicate key {key!r}", key_node.start_mark)
        mapping[key] = loader.construct_object(value_node, deep=True)
        mapping.key_lines[key] = key_node.start_mark.line + 1
    return mapping


def _construct_sequence(loader, node):
    seq = Seq(loader.construct_object(child, deep=True) for child in node.value)
    seq.line = node.start_mark.line + 1
    seq.item_lines = [child.start_mark.line + 1 for child in node.value]
    return seq


@lru_cache(maxsize=None)
def _loader():
    """A SafeLoader (libyaml's when PyYAML ships it: ~10x faster) that builds Node/Seq."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
    loader = type("_Loader", (base,), {})
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_MAPPING_TAG, _construct_mapping)
    loader.add_constructor(yaml.resolver.BaseResolver.DEFAULT_SEQUENCE_TAG, _construct_sequence)
    loader.add_constructor("tag:yaml.org,2002:float", _construct_float)
    return loader


# Every file a user hands cudabox (cudabox.yaml, cudabox.lock, requirements, inventories) is read through
# read_input: bounded, regular files only, so `requirements_file: /dev/zero` is an error, not an OOM kill.
MAX_INPUT_BYTES = 8 << 20


def printable(name: str) -> str:
    """A file name as text that can be printed and written to UTF-8 files: undecodable bytes of the name
    (`requirements-\\xff.txt`) shown escaped instead of failing the output."""
    try:
        name.encode("utf-8")
        return name
    except UnicodeEncodeError:
        return os.fsencode(name).decode("utf-8", "backslashreplace")


def display_path(path: Path) -> str:
    """A path as the user should see it: relative to the cwd when inside it."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd()))
    except (ValueError, OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return str(path)


def real_path(path) -> Path:
    """`path` with its symlinks followed; a symlink loop (Path.resolve raises on one) stays as given, made
    absolute: reading it then says, once and in one line, what is wrong."""
    try:
        return Path(path).resolve()
    except (OSError, RuntimeError):  # RuntimeError: a symlink loop (Python < 3.13)
        return Path(os.path.abspath(path))


def not_a_file(path) -> str:
    """Why `path`, which is there, is no file to read: a directory, a device or pipe, a link to nothing."""
    try:
        mode = os.stat(path).st_mode
    except OSError as exc:
        return f"a symlink that leads nowhere ({exc.strerror or exc})"
    if stat.S_ISDIR(mode):
        return "a directory, not a file"
    return "not a regular file (a device, pipe or socket)"


def read_input(path: Path, *, limit: int = MAX_INPUT_BYTES, shown: str | None = None) -> bytes:
    """The bytes of a user's input file; `file: ...` InputErrors for a missing, odd, huge or unreadable one."""
    def fail(why: str):  # the name to show is worked out for an error only (a resolve reads ~50 files)
        return located(shown or display_path(path), None, why)

    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        raise fail("file not found") from None
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISDIR(mode):
            raise fail("is a directory; expected a file")
        if not stat.S_ISREG(mode):
            raise fail("is not a regular file (a device, pipe or socket); expected a file")
        chunks, size = [], 0
        while size <= limit:
            chunk = os.read(fd, min(1 << 20, limit + 1 - size))
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
    except OSError as exc:
        raise fail(f"cannot read: {exc.strerror or exc}") from None
    finally:
        os.close(fd)
    if size > limit:
        raise fail(f"larger than {limit >> 20} MiB; not an input file cudabox reads")
    return b"".join(chunks)


def decode_input(data: bytes, shown: str) -> str:
    """UTF-8 text, or an InputError naming the line of the first byte that isn't."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[:exc.start].count(b"\n") + 1
        raise located(shown, line, f"not valid UTF-8 (byte 0x{data[exc.start]:02x}); save the file as UTF-8") \
            from None


def read_input_text(path: Path, *, limit: int = MAX_INPUT_BYTES, shown: str | None = None) -> str:
    shown = shown or display_path(path)
    return decode_input(read_input(path, limit=limit, shown=shown), shown)


def load_yaml(path: Path, text: str | None = None, *, shown: str | None = None):
    """Parse a YAML file into Node/Seq (read bounded unless `text` is given); errors become `file:line: ...`
    InputErrors, the file named `shown` (default: relative to the current directory)."""
    path = Path(path)
    shown = shown or display_path(path)
    if text is None:
        text = read_input_text(path, shown=shown)
    import yaml

    try:
        return yaml.load(text, Loader=_loader())  # noqa: S506 - _loader() derives from SafeLoader
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        line = mark.line + 1 if mark else None
        problem = exc.problem or exc.context or "invalid YAML"
        raise located(shown, line, f"invalid YAML: {problem}") from None
    except yaml.reader.ReaderError as exc:  # a character YAML refuses (control characters)
        line = text[:exc.position].count("\n") + 1 if isinstance(exc.position, int) else None
        raise located(shown, line, f"invalid YAML: {exc.reason} (character {exc.character!r})") \
            from None
    except yaml.YAMLError as exc:
        raise located(shown, None, f"invalid YAML: {str(exc).splitlines()[0]}") from None
    except RecursionError:
        raise located(shown, None, "invalid YAML: nested too deeply") from None


def write_atomic(path: Path, data: str | bytes, mode: int | None = None) -> None:
    """Write `data` to `path` via a temp file in the same directory and an atomic rename."""
    path = Path(path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        import tempfile  # here: a read-only command never loads it

        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:  # a read-only project folder, a file where a folder should be: the user can fix it
        raise located(display_path(path), None, f"cannot write: {exc.strerror or exc}") from None
    binary = isinstance(data, bytes)
    try:
        with os.fdopen(fd, "wb" if binary else "w", **({} if binary else {"encoding": "utf-8"})) as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        elif path.exists():
            os.chmod(tmp, path.stat().st_mode & 0o7777)
        else:
            os.chmod(tmp, 0o644)
        os.replace(tmp, path)
    except BaseException as exc:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        if isinstance(exc, OSError):  # disk full, cudabox.lock is a directory...
            raise located(display_path(path), None, f"cannot write: {exc.strerror or exc}") from None
        raise
