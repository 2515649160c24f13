"""What the client-side commands (`run`, `jobs`, `job`) share: the help formatter that shows
defaults, the connection options, and turning the client's errors into one line and an exit code.

Exit codes: 0 ok; 1 the job or the request failed (the server refused it, the job failed, the
server cannot be reached); 2 a usage error (arguments, files, a missing or unknown token)."""
from __future__ import annotations

import argparse
import os
import sys

import httpx

OK, FAILED, USAGE = 0, 1, 2
DEFAULT_URL = "http://127.0.0.1:8470"


class HelpFormatter(argparse.HelpFormatter):
    """Shows every option's default, unless its help already says it (or there is none to say)."""

    def _get_help_string(self, action: argparse.Action) -> str:
        text = action.help or ""
        if "default" in text.lower() or "%(default)" in text or not action.option_strings:
            return text
        if action.default in (None, False, [], argparse.SUPPRESS) or isinstance(action, argparse._HelpAction):
            return text
        return f"{text} (default: %(default)s)".strip()


class CliError(Exception):
    """A problem to report as one line (`jumpgate CMD: message`) and exit with `code`."""

    def __init__(self, message: str, code: int = FAILED) -> None:
        super().__init__(message)
        self.code = code


def add_connection(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=os.environ.get("JUMPGATE_URL") or DEFAULT_URL,
                   help="the Jumpgate server (default: $JUMPGATE_URL, else %(default)s)")
    p.add_argument("--token", default=None,
                   help="bearer token of a server with tenants (default: $JUMPGATE_TOKEN)")


def connect(args: argparse.Namespace):
    from ..client import Jumpgate

    token = args.token if args.token is not None else os.environ.get("JUMPGATE_TOKEN") or None
    return Jumpgate(args.url, token=token)


def explain(e: BaseException, url: str) -> CliError | None:
    """The one line (and exit code) for an error the client raised, or None if it is none of ours."""
    from ..client.errors import BuilderError, ClientError, JobFailed, JobTimeout, RequestRejected, StreamError

    if isinstance(e, RequestRejected):
        err = e.error if isinstance(e.error, dict) else {"message": str(e.error)}
        message = err.get("message") or str(err)
        if e.status == 401:
            return CliError(f"the server at {url} refused the token ({message}): pass --token TOKEN or set "
                            "JUMPGATE_TOKEN (`jumpgate tokens add` makes one)", USAGE)
        if e.status == 403:
            return CliError(f"not allowed: {message}", USAGE)
        where = f" (at {err['path']})" if err.get("path") else ""
        extra = ""
        if isinstance(err.get("reasons"), dict):
            extra = "; " + "; ".join(f"{k}: {v}" for k, v in err["reasons"].items())
        return CliError(f"the server refused the request ({e.status}): {message}{where}{extra}", FAILED)
    if isinstance(e, JobFailed):
        return CliError(str(e), FAILED)
    if isinstance(e, BuilderError):
        return CliError(str(e), USAGE)
    if isinstance(e, (JobTimeout, StreamError)):
        return CliError(str(e), FAILED)
    if isinstance(e, ClientError):
        if isinstance(e.__cause__, httpx.HTTPError):
            return CliError(f"cannot reach a Jumpgate server at {url} ({e.__cause__}): start one with "
                            "`jumpgate serve --data-root DIR`, or pass --url", FAILED)
        return CliError(str(e), FAILED)
    if isinstance(e, httpx.HTTPError):
        return CliError(f"cannot reach a Jumpgate server at {url} ({e}): start one with "
                        "`jumpgate serve --data-root DIR`, or pass --url", FAILED)
    return None


def report(command: str, e: CliError) -> int:
    print(f"jumpgate {command}: {e}", file=sys.stderr)
    return e.code
