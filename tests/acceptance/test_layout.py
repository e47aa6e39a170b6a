"""The shape of the house (README, "Layout"): one crate per room under shared/, arrows that
point down only, `plan` without IO or async, the AWS SDK in `aws` alone, and Lambda
binaries without the CLI's dependencies. Read from `cargo metadata` and `cargo tree`, so a
dependency added in the wrong place fails here, not in review."""

import json
import re
import subprocess
from functools import cache
from pathlib import Path

import pytest

from conftest import REPO

# Each workspace crate and the workspace crates it may depend on (directly; normal
# dependencies). Down only: functions/cli -> mirror, aws, lakebase, unity; mirror, aws ->
# iceberg, events; aws -> rest -> iceberg; iceberg -> plan -> delta -> storage; events ->
# plan, delta (the one grammar of log file names), storage. lakebase reads Unity Catalog
# sources, a step sideways on the same floor; lakebase and unity take the tables that events
# announced (AnnouncedTable) from events.
# runtime (error kinds, metrics, deadlines, crash points, batch failures) is the bottom floor,
# using nothing of ours: every room's error says its kind through it (issue 53).
ALLOWED = {
    "lakemirror-runtime": set(),
    "lakemirror-storage": {"lakemirror-runtime"},
    "lakemirror-delta": {"lakemirror-storage", "lakemirror-runtime"},
    "lakemirror-plan": {"lakemirror-delta", "lakemirror-runtime"},
    "lakemirror-iceberg": {"lakemirror-plan", "lakemirror-delta", "lakemirror-storage", "lakemirror-runtime"},
    "lakemirror-events": {"lakemirror-plan", "lakemirror-delta", "lakemirror-storage", "lakemirror-runtime"},
    "lakemirror-mirror": {"lakemirror-iceberg", "lakemirror-events", "lakemirror-plan", "lakemirror-delta",
                          "lakemirror-storage", "lakemirror-runtime"},
    "lakemirror-rest": {"lakemirror-iceberg", "lakemirror-storage", "lakemirror-runtime"},
    "lakemirror-aws": {"lakemirror-iceberg", "lakemirror-events", "lakemirror-rest", "lakemirror-storage",
                       "lakemirror-runtime"},
    "lakemirror-unity": {"lakemirror-events", "lakemirror-plan", "lakemirror-delta", "lakemirror-storage",
                         "lakemirror-runtime"},
    "lakemirror-lakebase": {"lakemirror-unity", "lakemirror-events", "lakemirror-plan", "lakemirror-delta",
                            "lakemirror-storage", "lakemirror-runtime"},
    "glue-sync": {"lakemirror-mirror", "lakemirror-aws", "lakemirror-events", "lakemirror-iceberg",
                  "lakemirror-unity", "lakemirror-storage", "lakemirror-runtime"},
    "lakebase-sync": {"lakemirror-aws", "lakemirror-events", "lakemirror-lakebase", "lakemirror-unity",
                      "lakemirror-storage", "lakemirror-runtime"},
    "unity-register": {"lakemirror-aws", "lakemirror-events", "lakemirror-unity", "lakemirror-storage",
                       "lakemirror-runtime"},
    "lakemirror-cli": {"lakemirror-mirror", "lakemirror-aws", "lakemirror-events", "lakemirror-iceberg",
                       "lakemirror-rest", "lakemirror-lakebase", "lakemirror-unity", "lakemirror-plan", "lakemirror-delta",
                       "lakemirror-storage", "lakemirror-runtime", "glue-sync", "lakebase-sync", "unity-register"},
    "lakemirror-tests": set(),
}
# The sync's orchestration is linked only where a mirror is written: reading an event, or
# speaking to AWS, does not pull it in (issue 33).
WITHOUT_THE_MIRROR = {"lakemirror-events": {"lakemirror-iceberg", "lakemirror-mirror"},
                      "lakemirror-aws": {"lakemirror-mirror"},
                      "lakemirror-rest": {"lakemirror-mirror"},
                      "lakebase-sync": {"lakemirror-mirror"},
                      "unity-register": {"lakemirror-mirror"}}
# What a pure planner may not depend on directly: anything that does IO or runs tasks.
NOT_IN_PLAN = {"tokio", "futures", "object_store", "bytes", "reqwest", "async-trait", "tokio-postgres"}
CLI_ONLY = {"clap"}  # tracing-subscriber comes with lambda_runtime
LIBRARIES = ("storage", "runtime", "delta", "plan", "iceberg", "events", "mirror", "rest", "aws", "lakebase",
             "unity")


@cache
def packages() -> dict:
    out = subprocess.run(["cargo", "metadata", "--no-deps", "--format-version", "1", "--offline"],
                         cwd=REPO, capture_output=True, text=True, check=True).stdout
    return {p["name"]: p for p in json.loads(out)["packages"]}


def normal_dependencies(package: str) -> set[str]:
    return {d["name"] for d in packages()[package]["dependencies"] if d["kind"] is None}


@cache
def linked(package: str) -> set[str]:
    """Every crate `package`'s own targets link (normal dependencies, transitively)."""
    out = subprocess.run(["cargo", "tree", "-p", package, "-e", "normal", "--prefix", "none", "--offline",
                          "--format", "{p}"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return {line.split()[0] for line in out.splitlines() if line.strip()}


def test_every_crate_of_the_workspace_has_its_place_in_the_layout():
    assert set(packages()) == set(ALLOWED)


@pytest.mark.parametrize("package", sorted(ALLOWED))
def test_dependencies_between_crates_point_down_only(package):
    ours = normal_dependencies(package) & set(ALLOWED)
    assert ours <= ALLOWED[package], f"{package} may not depend on {sorted(ours - ALLOWED[package])}"


@pytest.mark.parametrize("package", sorted(WITHOUT_THE_MIRROR))
def test_events_and_adapters_do_not_link_the_sync(package):
    assert not linked(package) & WITHOUT_THE_MIRROR[package], \
        f"{package} links {sorted(linked(package) & WITHOUT_THE_MIRROR[package])}"


def test_the_planner_does_no_io_and_runs_no_tasks():
    assert not normal_dependencies("lakemirror-plan") & NOT_IN_PLAN
    source = "\n".join(p.read_text() for p in (REPO / "shared" / "plan" / "src").rglob("*.rs"))
    for word in ("async fn", ".await", "std::fs", "std::net", "tokio::"):
        assert word not in source, f"lakemirror-plan uses {word!r}"


@pytest.mark.parametrize("package", sorted(set(ALLOWED) - {"lakemirror-aws", "lakemirror-cli", "glue-sync",
                                                              "lakebase-sync", "unity-register", "lakemirror-tests"}))
def test_only_the_aws_crate_links_the_aws_sdk(package):
    sdk = {name for name in linked(package) if name.startswith("aws-sdk-") or name == "aws-config"}
    assert not sdk, f"{package} links {sorted(sdk)}"


@pytest.mark.parametrize("function", ["glue-sync", "lakebase-sync", "unity-register"])
def test_lambda_functions_do_not_link_the_clis_dependencies(function):
    assert not linked(function) & CLI_ONLY, f"{function} links {sorted(linked(function) & CLI_ONLY)}"


def resolved_features(edges: str) -> dict[str, str]:
    """The features cargo resolves for each crates.io package of the workspace's build, when the
    build follows `edges` (`normal,build` for the binaries, `normal,build,dev` with the tests)."""
    out = subprocess.run(["cargo", "tree", "--workspace", "-e", edges, "--prefix", "none", "--offline",
                          "--format", "{p}|{f}"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    features = {}
    for line in out.splitlines():
        package, _, enabled = line.partition("|")
        if package and "(/" not in package:  # the workspace's own crates carry their path
            features[package.removesuffix(" (proc-macro)")] = enabled.removesuffix(" (*)")
    return features


def test_the_tests_build_the_dependencies_the_binaries_build():
    """A feature that only a dev-dependency turns on (tokio's test-util, say) makes cargo build
    everything above that crate twice: once for the binaries (`cargo build --bins`, the event
    loop's), once for the tests. The workspace's Cargo.toml turns such features on for both."""
    binaries, with_tests = resolved_features("normal,build"), resolved_features("normal,build,dev")
    assert binaries, "cargo tree listed no package"
    differing = {package: f"{enabled!r} -> {with_tests.get(package)!r}" for package, enabled in binaries.items()
                 if with_tests.get(package) != enabled}
    assert not differing, f"the tests turn on features the binaries build without: {differing}"


def test_environment_variables_are_read_by_binaries_only():
    """Libraries take their settings as arguments; each `main` (and the CLI) reads the
    environment once."""
    for crate in LIBRARIES:
        for path in (REPO / "shared" / crate / "src").rglob("*.rs"):
            code = path.read_text().split("#[cfg(test)]")[0]
            assert "env::var(" not in code, f"{path.relative_to(REPO)} reads the environment"


def test_library_messages_name_settings_not_the_clis_flags():
    """A library's error speaks to Lambda and CLI users alike, so it names the setting
    (`sync.mode`, `UC_SCHEMA`); the CLI adds its own flag (shared/cli/src/error.rs)."""
    import re
    flags = set()
    for path in (REPO / "shared" / "cli" / "src").rglob("*.rs"):
        for field in re.findall(r"#\[arg\([^\]]*long[^\]]*\)\]\s*(?:///[^\n]*\n\s*)*pub (\w+):", path.read_text()):
            flags.add("--" + field.replace("_", "-"))
    assert {"--mode", "--schema", "--postgres-url", "--table-uri"} <= flags, "the CLI's flags are read"
    for crate in LIBRARIES:
        for path in (REPO / "shared" / crate / "src").rglob("*.rs"):
            code = path.read_text().split("#[cfg(test)]")[0]
            for number, line in enumerate(code.splitlines(), 1):
                if line.lstrip().startswith("//"):
                    continue
                named = {f for f in re.findall(r"--[a-z][a-z-]*", line) if f in flags}
                assert not named, f"{path.relative_to(REPO)}:{number} names {named}: {line.strip()}"


# The size of a room's files and functions (issue 44): past these, a newcomer reads a file by
# searching it, and a function's steps have no names. Counted before a file's
# `#[cfg(test)]`: tests may be long.
MAX_FILE_LINES = 900
MAX_FUNCTION_LINES = 120
# Every room, the CLI and the functions (issue 53: the rule held for mirror and iceberg only).
SHORT_FUNCTIONS_IN = tuple(f"shared/{room}" for room in LIBRARIES + ("cli",)) + ("functions",)
FUNCTION = re.compile(r"^(\s*)(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"\w+\"\s+)?fn\s+(\w+)")


def outside_tests(path: Path) -> list[str]:
    """The lines before the file's inline test module (`#[cfg(test)]` then `mod … {`); a
    `#[cfg(test)] mod tests;` naming another file cuts nothing, and that file (`tests.rs`)
    is all tests."""
    if path.name == "tests.rs":
        return []
    lines = path.read_text().splitlines()
    end = next((n for n in range(len(lines) - 1) if lines[n].startswith("#[cfg(test)]")
                and re.match(r"mod \w+ \{$", lines[n + 1])), len(lines))
    return lines[:end]


def long_functions(path: Path) -> list[tuple[str, int]]:
    """(name, lines) of each function over the limit: from its `fn` line to the `}` at its
    indentation (rustfmt's layout)."""
    lines, found = outside_tests(path), []
    for start, line in enumerate(lines):
        match = FUNCTION.match(line)
        if not match or line.rstrip().endswith((";", "}")):
            continue
        close = match.group(1) + "}"
        end = next((n for n in range(start + 1, len(lines)) if lines[n] == close), None)
        assert end is not None, f"{path}:{start + 1}: no closing brace at the indentation of fn {match.group(8)}"
        if end - start + 1 > MAX_FUNCTION_LINES:
            found.append((match.group(8), end - start + 1))
    return found


def test_no_file_of_a_room_is_longer_than_a_newcomer_reads():
    long = {str(p.relative_to(REPO)): len(outside_tests(p)) for p in sorted((REPO / "shared").rglob("*.rs"))
            if len(outside_tests(p)) > MAX_FILE_LINES}
    assert long == {}, f"files over {MAX_FILE_LINES} lines before their tests: split them by concern"


@pytest.mark.parametrize("room", SHORT_FUNCTIONS_IN)
def test_functions_of_every_room_read_as_named_steps(room):
    long = {f"{p.relative_to(REPO)}::{name}": n for p in sorted((REPO / room).rglob("*.rs"))
            for name, n in long_functions(p)}
    assert long == {}, f"functions over {MAX_FUNCTION_LINES} lines: give their steps names"


def test_the_size_rules_can_fail(tmp_path):
    body = "\n".join(["    let x = 1;"] * MAX_FUNCTION_LINES)
    source = tmp_path / "long.rs"
    source.write_text(f"fn long() {{\n{body}\n}}\n\n#[cfg(test)]\nmod tests {{\n    fn t() {{\n{body}\n    }}\n}}\n")
    assert long_functions(source) == [("long", MAX_FUNCTION_LINES + 2)]
    assert len(outside_tests(source)) == MAX_FUNCTION_LINES + 3
    # A test module in its own file cuts nothing: what follows it is still counted.
    elsewhere = tmp_path / "mod.rs"
    elsewhere.write_text(f"#[cfg(test)]\nmod tests;\n\npub async fn long() {{\n{body}\n}}\n")
    assert long_functions(elsewhere) == [("long", MAX_FUNCTION_LINES + 2)]
