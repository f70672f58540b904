"""Command-line interface: thin commands over the core, one renderer, one error map."""

from __future__ import annotations

import os
import signal  # here, not in main(): a Ctrl-C while it loads is caught by memcli/__main__.py
import sys


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def main(argv: list[str] | None = None) -> None:
    """Entry point of the ``memcli`` console script; maps every failure to an exit code (Ctrl-C while
    it starts, before the commands are loaded, is 130 too)."""
    code: int | str | None = None  # a Ctrl-C before the command sets its code is an interruption
    try:
        try:
            _main(argv)
            code = 0
        except SystemExit as done:
            code = 0 if done.code is None else done.code
        except KeyboardInterrupt:
            pass
        except Exception as exc:
            if not interrupted(exc):
                raise
        signal.signal(signal.SIGINT, signal.SIG_IGN)  # the command is over: Ctrl-C from here on changes nothing
    except KeyboardInterrupt:  # it came between the command's end and the line above: the command's code stands
        signal.signal(signal.SIGINT, signal.SIG_IGN)
    if code is None:  # interrupted before the commands' own handler could say so
        print("memcli: interrupted", file=sys.stderr)
        code = 130
    if code == 130:  # interrupted: Python would end itself by SIGINT (exit -2) rather than say 130
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(130)
    sys.exit(code)


def interrupted(exc: BaseException) -> bool:
    """Whether a Ctrl-C is behind `exc`: Python wraps one that lands in a class body being built
    (``RuntimeError: Error calling __set_name__``) or in a cleanup into another exception."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, KeyboardInterrupt):
            return True
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return False


def _main(argv: list[str] | None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv == ["--version"]:  # fast path: nothing heavy, not even Typer
        from memcli import __version__

        print(f"memcli {__version__}")
        sys.exit(0)
    at = 0 if argv[:1] == ["hook"] else 2 if argv[2:3] == ["hook"] and argv[0] == "--store" else None
    if at is not None and len(argv) > at + 1 and not sys.stdin.isatty():
        from memcli.hook_start import (  # fast path: a session-end hook answers at once, without Typer
            CONTEXT_EVENTS,
            HOSTS,
            quick,
        )

        if argv[at + 1] in HOSTS:
            raw = sys.stdin.read()
            code = quick(argv, raw)
            if code is None and any(f'"{name}"' in raw for name in CONTEXT_EVENTS):  # a session start or a
                from memcli.hooks import context_quick  # prompt's recall without Typer

                code = context_quick(argv, raw)
            if code is not None:
                sys.exit(code)
            import io

            sys.stdin = io.StringIO(raw)  # the full command reads the same event
    if "mcp" in argv[:3] and not sys.stdin.isatty():  # only `[--store S] mcp ...` pays for the module
        from memcli.mcp_start import begin, serves

        if serves(argv):  # fast path: the host's initialize answered before the SDK and the store load
            begin(argv)
    sys.exit(run(argv))


def _name_holder(app, argv: list[str]) -> None:
    """What a writer of this command says of itself in the store's lock: its name, no arguments."""
    from memcli.store import atomic

    names = {info.name or info.callback.__name__.replace("_", "-") for info in app.registered_commands}
    names |= {group.name for group in app.registered_groups}
    verb = next((word for word in argv if word in names), "")
    atomic.HOLDER_NOTE[0] = f"memcli {verb}".strip()


def run(argv: list[str]) -> int:
    import typer

    from memcli.cli import commands  # noqa: F401  (registers the commands)
    from memcli.cli.app import app
    from memcli.cli.output import Output
    from memcli.errors import EXIT_INTERRUPTED, EXIT_USAGE, MemcliError, UsageError

    _name_holder(app, argv)
    debug = "--debug" in argv or os.environ.get("MEMCLI_DEBUG") in ("1", "true", "yes")
    out = Output(json=_wants_json(argv))
    if not argv:
        argv = ["--help"]
    try:
        result = app(args=argv, prog_name="memcli", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except MemcliError as err:
        if debug:
            import traceback

            traceback.print_exc()
        out.error(err)
        return err.exit_code
    except typer.Exit as exc:
        return exc.exit_code
    except (typer.Abort, KeyboardInterrupt):
        print("memcli: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except typer.TyperException as exc:  # Typer's own usage errors (unknown option, missing argument)
        code = getattr(exc, "exit_code", EXIT_USAGE)
        ctx = getattr(exc, "ctx", None)
        if ctx is not None and not out.json:
            print(ctx.get_usage(), file=sys.stderr)
        out.error(UsageError(exc.format_message()) if code == EXIT_USAGE else MemcliError(exc.format_message()))
        return code
    except OSError as exc:
        if isinstance(exc, BrokenPipeError):
            return _broken_pipe()
        from memcli.errors import StoreWriteError

        if exc.errno not in StoreWriteError.ERRNOS:  # not a file that could not be written: a bug
            return _internal(exc, out, debug)

        err = StoreWriteError.of(exc.filename or "a file", exc)
        out.error(err)
        return err.exit_code
    except Exception as exc:  # a bug: say what happened; traceback with --debug
        if interrupted(exc):
            print("memcli: interrupted", file=sys.stderr)
            return EXIT_INTERRUPTED
        return _internal(exc, out, debug)


def _broken_pipe() -> int:
    """The reader went away (`memcli grep x | head`): not worth a traceback."""
    from memcli.errors import EXIT_FAILURE

    try:
        sys.stdout = open(os.devnull, "w")
    except OSError:
        pass
    return EXIT_FAILURE


def _internal(exc: BaseException, out, debug: bool) -> int:
    from memcli.errors import EXIT_FAILURE, MemcliError

    if debug:
        import traceback

        traceback.print_exc()
    out.error(MemcliError(f"internal error: {type(exc).__name__}: {exc}",
                          hint="run again with --debug for a traceback, and please report it"))
    return EXIT_FAILURE

