"""Support leaves every layer may use: paths, deadlines, process lifetimes, the code version, the command line's
one-line errors, native logs, identifiers, directory swaps. They import nothing of ours but `adreno.errors` and the
package's version (`tests/test_architecture.py` checks it)."""
