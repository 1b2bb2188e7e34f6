"""The `sleuth` command line (click): one module per family of commands.

A command's module is imported only when that command runs (`LAZY`), and
imports of the heavier subsystems happen inside each command, so `sleuth
check` on a small history starts in a fraction of a second.
"""

from __future__ import annotations

import importlib
import os
import signal
import sys
import traceback

import click

from sleuth.base import exits

# command name -> the module that defines it (a click command of that name)
LAZY = {"check": "sleuth.cli.check", "sim": "sleuth.cli.check", "shrink": "sleuth.cli.shrink",
        "run": "sleuth.cli.run", "report": "sleuth.cli.run", "serve": "sleuth.cli.run",
        "cluster": "sleuth.cli.cluster", "campaign": "sleuth.cli.campaign"}


class _Sleuth(click.Group):
    """Every command's usage errors follow the exit table (docs/exit-status.md): one line on
    stderr and 254 (click's own are three lines and 2, which CI would read as "unknown"); a
    Ctrl-C that reaches click (a command with no handler of its own) is an interrupt: 2; any
    other exception is sleuth's own failure: one line and 255 (the traceback with SLEUTH_DEBUG=1)."""

    def main(self, args=None, prog_name=None, complete_var=None, standalone_mode=True, **extra):
        try:
            status = super().main(args, prog_name, complete_var, standalone_mode=False, **extra)
        except click.UsageError as e:
            exits.die(" ".join(e.format_message().split()))
        except click.exceptions.Abort:
            exits.die("interrupted", exits.UNKNOWN)
        except click.ClickException as e:  # click's other errors (an unreadable file argument)
            exits.die(" ".join(e.format_message().split()))
        except Exception as e:  # noqa: BLE001 - a bug of sleuth's: one line, 255, never a traceback
            if os.environ.get("SLEUTH_DEBUG") == "1":
                traceback.print_exc()
            what = f"{type(e).__name__}: {e}".splitlines()[0]
            exits.die(f"sleuth failed ({what}); SLEUTH_DEBUG=1 shows the traceback", exits.CRASHED)
        sys.exit(status if isinstance(status, int) else 0)

    lazy: dict[str, str] = {}  # commands imported when first asked for (LAZY, on `main`)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted({*super().list_commands(ctx), *self.lazy})

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in self.lazy:
            self.add_command(getattr(importlib.import_module(self.lazy[name]), name), name)
        return super().get_command(ctx, name)


@click.group(cls=_Sleuth, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="sleuth")
def main() -> None:
    """sleuth: a Jepsen-style consistency checker for SQL systems."""


main.lazy = LAZY


PROGRAM = False  # running as the `sleuth` program (`entry`), not called in-process (tests)
FAST_EXIT = False  # set by a command (check) after which the program may leave at once


def _terminated(signum, frame) -> None:
    raise KeyboardInterrupt


def entry() -> None:
    """The `sleuth` program: `main`, and after `sleuth check` an exit that
    skips tearing down the heap.

    A check of a million transactions leaves tens of millions of small
    objects that the interpreter would free one by one on the way out (over
    a second, for nothing). `check` starts no threads or child processes and
    closes what it writes, so once stdout and stderr are flushed nothing is
    lost. Other commands (which run clusters, Spark, threads) exit as usual;
    in-process callers (tests) call `main`.
    """
    global PROGRAM
    PROGRAM = True
    # sleuth does no linear algebra, but numpy's OpenBLAS starts a thread per core at import and
    # they spin after any call that reaches it: 60 ms of CPU at every start-up and 0.2 s in a
    # 100k-transaction check on this 2-core machine, taken from whatever else runs. Set before
    # numpy is first imported (commands import it lazily); a user's own setting wins.
    os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
    # SIGTERM (what a CI job's timeout sends) is an interrupt, as Ctrl-C is: "interrupted", exit 2
    # (docs/exit-status.md), not death by the signal (143); commands with their own handling
    # (run, campaign, serve) replace this. An inherited "ignore" is kept.
    if signal.getsignal(signal.SIGTERM) == signal.SIG_DFL:
        signal.signal(signal.SIGTERM, _terminated)
    try:
        main()
    except SystemExit as e:
        if not FAST_EXIT:
            raise
        code = e.code
        if code is not None and not isinstance(code, int):
            print(code, file=sys.stderr)
            code = 1
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:  # the reader went away (`| head`): as Python itself would, quietly
            pass
        os._exit(code or 0)
