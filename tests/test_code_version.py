"""The code fingerprint in measured costs' keys moves with the code that makes kernels, and only with it."""

import shutil

from adreno.support.code_version import PACKAGE, code_fingerprint, sources_fingerprint


def test_fingerprint_follows_kernel_code_only(tmp_path):
    copy = tmp_path / "adreno"
    shutil.copytree(PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__", "*.so", "*.o"))
    assert sources_fingerprint(copy) == code_fingerprint() == sources_fingerprint(PACKAGE)
    with open(copy / "cli" / "main.py", "a") as handle:  # the CLI makes no kernel
        handle.write("\n# a comment\n")
    assert sources_fingerprint(copy) == code_fingerprint()
    with open(copy / "orchestrate" / "blp.py", "a") as handle:  # the solver chooses among measured kernels
        handle.write("\n# a comment\n")
    assert sources_fingerprint(copy) == code_fingerprint()
    with open(copy / "orchestrate" / "costs.py", "a") as handle:  # how a candidate is built and timed matters
        handle.write("\n# a comment\n")
    assert sources_fingerprint(copy) != code_fingerprint()
    shutil.copyfile(PACKAGE / "orchestrate" / "costs.py", copy / "orchestrate" / "costs.py")
    with open(copy / "schedules" / "dense.py", "a") as handle:  # a schedule does
        handle.write("\n# a comment\n")
    changed = sources_fingerprint(copy)
    assert changed != code_fingerprint() and len(changed) == 12
    (copy / "new_pass.py").write_text("X = 1\n")  # a module nobody listed is hashed
    assert sources_fingerprint(copy) not in (changed, code_fingerprint())
