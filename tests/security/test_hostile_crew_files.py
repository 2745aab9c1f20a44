"""Hostile crew files against a real ``orkeon crew validate`` (issue 34): each is
refused with a typed error naming the rule and the position, in a child process held to
an address-space bound and a timeout (nothing hangs, nothing grows), and no refused
file's content reaches the output. ``docs/security.md`` states the bounds."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from orkeon_actors.acl import AclYamlError, load_links
from orkeon_actors.errors import YamlInputError

MEMORY_BOUND = 1536 * 1024 * 1024
"""The child's address space: the interpreter and the package fit well under it; the
billion laughs of issue 34 grew to 2.85 GB before the guarded loader."""

CREW_TAIL = "orchestration: {mode: sequential, tasks: [{description: go, agent: a}]}\n"
PASSWD_LINE = "root:x:0:0:root:/root:/bin/bash"


def _bounded() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_BOUND, MEMORY_BOUND))


def validate(*args: str, command: str = "validate") -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "orkeon_actors.cli", "crew", command, *args],
        capture_output=True,
        text=True,
        timeout=120,
        preexec_fn=_bounded,
        check=False,
    )


def _laughs(directory: Path) -> Path:
    lines = ['a: &a ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
    lines += [f"{b}: &{b} [" + ",".join([f"*{a}"] * 9) + "]" for a, b in zip("abcdefgh", "bcdefghi", strict=True)]
    path = directory / "laughs.yaml"
    path.write_text("\n".join(lines) + "\nname: x\n", encoding="utf-8")
    return path


def _write(name: str, text: str | bytes) -> Callable[[Path], Path]:
    def make(directory: Path) -> Path:
        path = directory / name
        if isinstance(text, bytes):
            path.write_bytes(text)
        else:
            path.write_text(text, encoding="utf-8")
        return path

    return make


def _million_keys(directory: Path) -> Path:
    path = directory / "keys.yaml"
    with path.open("w", encoding="utf-8") as out:
        out.writelines(f"k{i}: {i}\n" for i in range(1_000_000))
    return path


HOSTILE_DOCUMENTS: dict[str, tuple[Callable[[Path], Path], str]] = {
    "billion-laughs": (_laughs, "MAX_YAML_NODES"),
    "a-million-keys": (_million_keys, "MAX_YAML_BYTES"),
    "python-tag": (_write("tag.yaml", "name: !!python/object/apply:os.system ['echo owned']\n"), "tag"),
    "5000-digit-integer": (_write("int.yaml", "name: x\nidle_timeout: " + "9" * 5000 + "\n"), "MAX_YAML_INT_DIGITS"),
    "invalid-utf8": (_write("utf.yaml", b"name: x\ndescription: \xff\xfe\n"), "not UTF-8"),
    "deep-block": (
        _write("deep.yaml", "name:\n" + "".join(" " * (2 * i) + "-\n" for i in range(1000))),
        "MAX_YAML_DEPTH",
    ),
    "deep-flow": (_write("flow.yaml", "name: " + "[" * 50_000 + "]" * 50_000 + "\n"), "MAX_YAML_FLOW_OPENERS"),
    "long-scalar": (_write("long.yaml", "name: x\ndescription: " + "x" * 300_000 + "\n"), "MAX_YAML_SCALAR_CHARS"),
    "raw-nel": (_write("nel.yaml", "name: x\ndescription: 'a\x85b'\n"), "U+0085"),
    "list-as-key": (_write("key.yaml", "? [a, b]\n: x\nname: x\n"), "mapping key"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_DOCUMENTS))
def test_a_hostile_crew_file_is_refused_with_a_typed_error(tmp_path: Path, case: str) -> None:
    make, expected = HOSTILE_DOCUMENTS[case]
    path = make(tmp_path)
    result = validate(str(path))
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert f"{path}: 1 problem" in result.stdout
    assert expected in result.stdout
    assert len(result.stdout) < 4096  # nothing of the document is echoed


def test_the_json_report_gives_the_line_and_column_of_the_refusal(tmp_path: Path) -> None:
    path = _laughs(tmp_path)
    result = validate("--json", str(path))
    [report] = json.loads(result.stdout)
    [issue] = report["issues"]
    assert (issue["file"], issue["line"]) == (str(path), 5) and issue["column"] > 1  # e: 66,430 nodes
    assert "MAX_YAML_NODES" in issue["message"]


def test_crew_run_refuses_the_same_files(tmp_path: Path) -> None:
    result = validate(str(_laughs(tmp_path)), command="run")
    assert result.returncode == 2 and "MAX_YAML_NODES" in result.stdout and "Traceback" not in result.stderr


def _agents_crew(directory: Path, entry: str) -> Path:
    crew = directory / "crew"
    crew.mkdir(exist_ok=True)
    (crew / "crew.yaml").write_text(f"name: x\nagents:\n  - {entry}\n{CREW_TAIL}", encoding="utf-8")
    return crew


def _fifo(crew: Path) -> str:
    os.mkfifo(crew / "agent.yaml")
    return "agent.yaml"


def _link_to(target: str) -> Callable[[Path], str]:
    def make(crew: Path) -> str:
        (crew / "agent.yaml").symlink_to(target)
        return "agent.yaml"

    return make


def _text_file(crew: Path) -> str:
    (crew / "notes.txt").write_text(PASSWD_LINE + "\n", encoding="utf-8")
    return "notes.txt"


def _big_file(crew: Path) -> str:
    (crew / "big.yaml").write_bytes(b"id: a\n" + b"#" * (2 * 1024 * 1024) + b"\n")
    return "big.yaml"


HOSTILE_REFERENCES: dict[str, tuple[Callable[[Path], str], str]] = {
    "etc-passwd": (lambda crew: "/etc/passwd", "outside the crew's directory"),
    "dot-dot": (lambda crew: "../../../../../../etc/passwd", "outside the crew's directory"),
    "symlink-out": (_link_to("/etc/passwd"), "outside the crew's directory"),
    "dev-zero": (lambda crew: "/dev/zero", "outside the crew's directory"),
    "fifo": (_fifo, "is a FIFO"),
    "directory": (lambda crew: ".", "is a directory"),
    "not-an-agent": (_text_file, "holds a str, not one agent mapping"),
    "oversized": (_big_file, "MAX_YAML_BYTES"),
}


@pytest.mark.parametrize("case", sorted(HOSTILE_REFERENCES))
def test_a_file_a_crew_refers_to_is_read_only_inside_its_directory(tmp_path: Path, case: str) -> None:
    make, expected = HOSTILE_REFERENCES[case]
    crew = tmp_path / "crew"
    crew.mkdir()
    entry = make(crew)
    _agents_crew(tmp_path, entry)
    result = validate(str(crew))
    assert result.returncode == 1, result.stderr[-2000:]
    assert "Traceback" not in result.stderr
    assert "agents[0]: " in result.stdout and expected in result.stdout
    assert "root:x:0:0" not in result.stdout + result.stderr  # no content of a refused file


@pytest.mark.parametrize("device", ["/dev/zero", "/dev/urandom"])
def test_a_device_given_as_the_crew_file_is_refused(device: str) -> None:
    result = validate(device)
    assert result.returncode == 1 and "is a character device" in result.stdout


def test_a_fifo_given_as_the_crew_file_does_not_hang(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "crew.yaml")
    result = validate(str(tmp_path / "crew.yaml"))
    assert result.returncode == 1 and "is a FIFO" in result.stdout


def test_the_links_loader_raises_the_typed_error_with_its_position() -> None:
    with pytest.raises(AclYamlError) as refused:
        load_links("name: x\nlinks:\n  - !!python/object:os.system {}\n")
    assert isinstance(refused.value, YamlInputError)
    assert (refused.value.line, refused.value.column) == (3, 5)
    assert str(refused.value).startswith("<crew yaml>:3:5: uses a tag")
