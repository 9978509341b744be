"""Issue 23, a release names what it is: `quorate version` prints the project's version and the commit
the binary was built from (scripts/commit's answer for this tree: the short hash, -dirty with
uncommitted changes), in both output formats. scripts/commit, which meson runs at every build, says
"unknown" for a tree without .git, what `meson dist` recorded in .commit for a tarball, and never the
hash of a checkout around the tree."""
import json
import os
import re
import shutil
import subprocess
import tempfile

import harness
from harness import QUORATE, check, log, run

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
COMMIT = os.path.join(ROOT, "scripts", "commit")


def commit_of(tree):
    return run([COMMIT, tree], check_rc=0).stdout.strip()


def test():
    version = os.environ["QUORATE_VERSION"]
    commit = commit_of(ROOT)
    if shutil.which("git") and os.path.exists(os.path.join(ROOT, ".git")):
        check(re.fullmatch(r"[0-9a-f]{7,40}(-dirty)?", commit), f"scripts/commit says {commit!r} in a checkout")
        head = run(["git", "-C", ROOT, "rev-parse", "HEAD"], check_rc=0).stdout.strip()
        check(head.startswith(commit.removesuffix("-dirty")), f"{commit} is not HEAD {head}")

    work = tempfile.mkdtemp(prefix="quorate-version-")
    harness._cleanups.append(lambda: shutil.rmtree(work, ignore_errors=True))
    # In an empty directory: no data dir, no member bucket, so nothing to ask peers about.
    text = run([QUORATE, "version", "--etcd", "/nonexistent"], check_rc=0, prefix=("env", f"--chdir={work}"))
    log(text.stdout.strip())
    check(f"quorate version: {version}\n" in text.stdout, f"no version {version} in:\n{text.stdout}")
    check(f"quorate commit: {commit}\n" in text.stdout, f"no commit {commit} in:\n{text.stdout}")
    doc = json.loads(run([QUORATE, "version", "-w", "json", "--etcd", "/nonexistent"], check_rc=0,
                         prefix=("env", f"--chdir={work}")).stdout)
    check(doc["quorate"] == version and doc["commit"] == commit, f"-w json: {doc}")

    # A tarball's tree: no .git of its own, unpacked inside some other checkout, whose hash it must not take.
    tarball = os.path.join(work, "quorate-" + version)
    os.mkdir(tarball)
    if shutil.which("git"):
        run(["git", "-C", work, "init", "-q"], check_rc=0)
        run(["git", "-C", work, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "--allow-empty",
             "-m", "outer"], check_rc=0)
    check(commit_of(tarball) == "unknown", f"a tree without .git: {commit_of(tarball)!r}")
    if os.path.exists(os.path.join(ROOT, ".git")):
        # As meson dist runs it: the tarball holds the committed tree, so never -dirty.
        run([COMMIT, "--record"], env=dict(os.environ, MESON_SOURCE_ROOT=ROOT, MESON_DIST_ROOT=tarball), check_rc=0)
        check(commit_of(tarball) == commit.removesuffix("-dirty"), f"a meson dist tarball: {commit_of(tarball)!r}")
    with open(os.path.join(tarball, ".commit"), "w") as f:
        f.write("0123abc\n")
    check(commit_of(tarball) == "0123abc", f"a tarball's .commit: {commit_of(tarball)!r}")
    with open(os.path.join(tarball, ".commit"), "w") as f:
        f.write("$(reboot)\n")
    check(commit_of(tarball) == "unknown", f"a .commit that is no hash: {commit_of(tarball)!r}")
    r = subprocess.run([COMMIT], capture_output=True, text=True)
    check(r.returncode != 0 and "usage" in r.stderr, f"scripts/commit without a tree: {r.returncode} {r.stderr}")


if __name__ == "__main__":
    harness.main(test)
