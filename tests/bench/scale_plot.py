"""Draws docs/scale.png from the tables `tests/bench/scale.py` printed into docs/scale.md: peak
RSS and bootstrap time of each build, by files in the table (a plot, not a measurement: run
scale.py for figures, paste its tables into docs/scale.md, then this).

    $(tests/rig/venv.sh tests/bench-requirements.txt)/bin/python tests/bench/scale_plot.py
"""

import re
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DOC = REPO / "docs" / "scale.md"
OUT = REPO / "docs" / "scale.png"
HEADER = "| files | layout | build | log MB | bootstrap s | peak RSS MB |"


def rows(text: str):
    """(files, build, bootstrap s, peak RSS MB) of every row of every bootstrap table."""
    found = []
    for table in text.split(HEADER)[1:]:
        for line in table.splitlines()[2:]:
            if not line.startswith("|"):
                break
            cells = [c.strip() for c in line.strip("|").split("|")]
            files, _, build, _, seconds, rss = cells[:6]
            if re.fullmatch(r"[\d.]+", seconds) and re.fullmatch(r"[\d.]+", rss):
                found.append((int(files.replace(",", "")), build, float(seconds), float(rss)))
    return found


def main() -> None:
    found = rows(DOC.read_text())
    if not found:
        sys.exit(f"no bootstrap tables ({HEADER} ...) in {DOC}")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    by_build = defaultdict(lambda: defaultdict(list))
    for files, build, seconds, rss in found:
        by_build[build][files].append((seconds, rss))
    fig, (time_ax, rss_ax) = plt.subplots(1, 2, figsize=(10, 4))
    for build, sizes in sorted(by_build.items()):
        xs = sorted(sizes)
        # The mean over the checkpoint layouts measured at that size.
        time_ax.plot(xs, [sum(s for s, _ in sizes[x]) / len(sizes[x]) for x in xs], "o-", label=build)
        rss_ax.plot(xs, [sum(r for _, r in sizes[x]) / len(sizes[x]) for x in xs], "o-", label=build)
    for ax, title, unit in ((time_ax, "bootstrap time", "s"), (rss_ax, "peak RSS", "MB")):
        ax.set_xscale("log")
        ax.set_xlabel("files in the table")
        ax.set_ylabel(unit)
        ax.set_title(title)
        ax.grid(True, alpha=0.3)
        ax.legend()
    rss_ax.axhline(2048, color="grey", linestyle=":", linewidth=1)
    rss_ax.text(1.1e6, 2100, "target at 10M files: 2 GB", fontsize=8, color="grey")
    fig.suptitle("First sync of a very large Delta table (tests/bench/scale.py, docs/scale.md)")
    fig.tight_layout()
    fig.savefig(OUT, dpi=110)
    print(f"wrote {OUT.relative_to(REPO)} from {len(found)} rows")


if __name__ == "__main__":
    main()
