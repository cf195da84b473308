"""What every entry point's command line shares: argparse's refusals, the check of numeric options and a user
error, each as one `error:` line on stderr with exit status 2, never a traceback or the usage text.

The entry points are the `adreno` command (`adreno.cli`) and the modules run as `python -m`: `adreno.farm.agent`,
`adreno.farm.tracker` and `adreno.runners.offline`. A farm agent starts without numpy and the offline runner runs
where TVM is missing, so this module imports neither, nor anything of ours but the errors.
"""

from __future__ import annotations

import argparse
import math
import re
import sys

from ..errors import AdrenoError

# The largest value a numeric option takes: counts past it would never finish (and overflow a C int), and seconds
# past it (68 years) overflow the clock a deadline is computed on.
OPTION_MAX = 2 ** 31 - 1

_MISSING_VALUE = re.compile(r"argument (\S+): expected one argument")


class OneLineParser(argparse.ArgumentParser):
    """argparse's own refusals (an unknown option, a value not of its type or among its choices) in the one-line
    form of every other user error, exit status 2, with where to look instead of the whole usage text. Subparsers
    it adds are OneLineParsers too (argparse makes them of their parent's class)."""

    def parse_known_args(self, args=None, namespace=None):
        # kept for `error`: argparse's message names the option but not the value it took for another option
        self._given = list(sys.argv[1:] if args is None else args)
        return super().parse_known_args(args, namespace)

    def error(self, message: str):
        print(f"error: {self.prog}: {message}{self._dash_hint(message)} (see `{self.prog} --help`)", file=sys.stderr)
        sys.exit(2)

    def _dash_hint(self, message: str) -> str:
        """For `--opt -O3`: argparse reads `-O3` as an option and says --opt "expected one argument"; the way to
        give a value that starts with '-' is `--opt=-O3`."""
        missing = _MISSING_VALUE.search(message)
        if not missing:
            return ""
        flags = missing.group(1).split("/")
        given = getattr(self, "_given", [])
        for flag, value in zip(given, given[1:]):
            if flag in flags and value.startswith("-"):
                return f"; a value starting with '-' is read as an option: write {flags[-1]}={value}"
        return ""


def require_positive(args, *names: str, allow_zero: tuple[str, ...] = ()) -> None:
    """An AdrenoError (one line, exit status 2) for a numeric option that is not a positive finite number (or, for
    those in `allow_zero`, not a non-negative one) up to `OPTION_MAX`: `--repeat 0` must not "succeed" measuring
    nothing."""
    for name in names:
        value = getattr(args, name)
        if value is None:  # not given: the command's default applies
            continue
        flag = "--" + name.replace("_", "-")
        low_ok = value >= 0 if name in allow_zero else value > 0
        if not ((isinstance(value, int) or math.isfinite(value)) and low_ok):
            raise AdrenoError(f"{flag} must be {'>= 0' if name in allow_zero else 'positive'}, not {value}")
        if value > OPTION_MAX:
            raise AdrenoError(f"{flag} must be at most {OPTION_MAX}, not {value}")


def refused(err: AdrenoError) -> int:
    """Report a user error as its one line on stderr; returns the exit status of a refusal, 2."""
    print(f"error: {err}", file=sys.stderr)
    return 2
