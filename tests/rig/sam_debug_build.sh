#!/usr/bin/env bash
# Lays the functions of the debug build out as `sam build` does and prints the folder:
#   <build>/<Function>/bootstrap   $CARGO_TARGET_DIR/debug/<Binary>, its debug info stripped
#   <build>/template.yaml          template.yaml with each function's CodeUri pointed at its
#                                  folder (what `sam build` writes; the build metadata stays)
# The `sam local invoke` tests of the test command run these: the binaries every other test ran,
# in Lambda's container, without a second compile of the whole tree for x86_64 release (15 to
# 25 minutes cold on 2 cores, and the tests beside it took twice as long). What a deployment
# uploads, the `sam build` of the same template, is made by tests/rig/sam_build.sh
# (localstack/sam-local.sh runs the tests on it) and by CI for arm64.
# Needs `cargo build --bins` first. Which binary each function runs comes from the template's
# Metadata.BuildProperties.Binary, as for `sam build`.
set -euo pipefail
cd "$(dirname "$0")/../.."
cache="${LAKEMIRROR_CACHE:-$HOME/.cache/lakemirror}"
debug="${CARGO_TARGET_DIR:-$cache/target}/debug"
build="${1:-$cache/sam-debug-build}"
sam_venv="$(tests/rig/venv.sh tests/sam-requirements.txt)"
rm -rf "$build"
mkdir -p "$build"
"$sam_venv/bin/python" - "$debug" "$build" <<'EOF'
import shutil
import subprocess
import sys
from pathlib import Path

from samcli.yamlhelper import yaml_dump, yaml_parse

debug, build = Path(sys.argv[1]), Path(sys.argv[2])
template = yaml_parse(Path("template.yaml").read_text())
functions = 0
for name, resource in template["Resources"].items():
    metadata = resource.get("Metadata") or {}
    if resource.get("Type") != "AWS::Serverless::Function" or metadata.get("BuildMethod") != "rust-cargolambda":
        continue
    binary = debug / metadata["BuildProperties"]["Binary"]
    if not binary.is_file():
        sys.exit(f"error: {binary} is missing: run `cargo build --workspace --bins` first")
    (build / name).mkdir()
    subprocess.run(["strip", "--strip-debug", "-o", str(build / name / "bootstrap"), str(binary)], check=True)
    resource["Properties"]["CodeUri"] = name
    metadata["SamResourceId"] = name
    functions += 1
if functions == 0:
    sys.exit("error: template.yaml names no rust-cargolambda function")
(build / "template.yaml").write_text(yaml_dump(template))
EOF
echo "$build"
