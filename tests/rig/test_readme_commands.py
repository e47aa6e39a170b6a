"""tests/rig/readme_commands.sh, CI's run of the README's commands from a cold target directory,
on stand-in commands: the script copied into a scratch checkout with its command list replaced
(the real commands take 11 to 14 minutes each from a cold target directory)."""

import os
import re
import subprocess
from pathlib import Path

from conftest import REPO

SCRIPT = REPO / "tests" / "rig" / "readme_commands.sh"


def scratch_checkout(tmp_path: Path, commands: list[str]) -> Path:
    """A folder laid out as the repository, holding the script with `commands` as its list."""
    rig = tmp_path / "repo" / "tests" / "rig"
    rig.mkdir(parents=True)
    text = SCRIPT.read_text()
    listed = "commands=(\n" + "".join(f'  "{c}"\n' for c in commands) + ")\n"
    text, replaced = re.subn(r"commands=\(\n.*?\n\)\n", listed, text, count=1, flags=re.S)
    assert replaced == 1, "readme_commands.sh no longer holds its list as commands=( … )"
    (rig / "readme_commands.sh").write_text(text)
    (rig / "readme_commands.sh").chmod(0o755)
    return tmp_path / "repo"


def run(repo: Path, cache: Path, *args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "LAKEMIRROR_CACHE": str(cache)}
    return subprocess.run([str(repo / "tests" / "rig" / "readme_commands.sh"), *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=60)


def test_a_command_runs_from_an_empty_target_once_per_change_to_its_script(tmp_path):
    cache = tmp_path / "cache"
    repo = scratch_checkout(tmp_path, ["ok|1|./ok.sh|ok.sh"])
    # The command notes the target directory it was given and whether it was empty.
    (repo / "ok.sh").write_text('#!/bin/sh\nls -A "$CARGO_TARGET_DIR" 2>/dev/null | wc -l >> ran\n'
                                'mkdir -p "$CARGO_TARGET_DIR" && touch "$CARGO_TARGET_DIR/built"\n')
    (repo / "ok.sh").chmod(0o755)
    assert run(repo, cache, "--due").stdout == "ok: due (./ok.sh)\n"
    first = run(repo, cache, "10")
    assert first.returncode == 0, first.stderr
    assert "passed from a cold target directory" in first.stderr
    assert run(repo, cache, "--due").stdout == ""
    assert run(repo, cache, "10").returncode == 0
    assert (repo / "ran").read_text().split() == ["0"], "ran again without a change to its script"
    (repo / "ok.sh").write_text((repo / "ok.sh").read_text() + "# changed\n")
    assert run(repo, cache, "10").returncode == 0
    assert (repo / "ran").read_text().split() == ["0", "0"], "a changed script must run again, from an empty target"
    assert not (cache / "readme-target").exists(), "the cold target directory is left behind"


def test_a_failing_command_fails_the_run_and_stays_due(tmp_path):
    cache = tmp_path / "cache"
    repo = scratch_checkout(tmp_path, ["bad|1|./bad.sh|bad.sh"])
    (repo / "bad.sh").write_text("#!/bin/sh\necho the demo broke\nexit 3\n")
    (repo / "bad.sh").chmod(0o755)
    out = run(repo, cache, "10")
    assert out.returncode == 1
    assert "failed (exit 3)" in out.stderr and "the demo broke" in out.stderr
    assert run(repo, cache, "--due").stdout == "bad: due (./bad.sh)\n"


def test_a_command_that_does_not_fit_waits_and_says_so(tmp_path):
    cache = tmp_path / "cache"
    repo = scratch_checkout(tmp_path, ["long|30|./long.sh|long.sh"])
    (repo / "long.sh").write_text("#!/bin/sh\ntouch ran\n")
    out = run(repo, cache, "10")
    assert out.returncode == 0
    assert "a later run takes it" in out.stderr
    assert not (repo / "ran").exists()
    assert run(repo, cache, "--due").stdout == "long: due (./long.sh)\n"


def test_minutes_must_be_a_number():
    out = subprocess.run([str(SCRIPT), "soon"], capture_output=True, text=True)
    assert out.returncode == 2 and "expected minutes" in out.stderr
