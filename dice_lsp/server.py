"""`dice-lsp` (and `python -m dice_lsp.server`): the DICE language server on stdio or TCP.

The server itself is dice_lsp/lsp/: its state (state.py), the handlers of each feature
(features/), and the wiring between them (wiring.py).
"""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path

from dice_lsp.lsp import transport
from dice_lsp.lsp.wiring import create_server


def port_number(text: str) -> int:
    if not text.isdigit() or not 0 <= int(text) <= 65535:
        raise argparse.ArgumentTypeError(f"{text!r} is not a TCP port (0 to 65535)")
    return int(text)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="dice-lsp", description="The DICE language server (stdio by default).")
    parser.add_argument("--tcp", action="store_true", help="listen on TCP instead of stdio")
    parser.add_argument("--host", default="127.0.0.1", help="with --tcp: address to listen on (default: %(default)s)")
    parser.add_argument("--port", type=port_number, default=2087, help="with --tcp: TCP port (default: %(default)s)")
    parser.add_argument(
        "--token",
        default=transport.configured_token(),
        help="with --tcp: the token a client must send as initializationOptions.token (default: $DICE_LSP_TOKEN, "
        "which other users cannot read in the process list, else a new random one); every listener has one, "
        "loopback included",
    )
    parser.add_argument(
        "--token-file",
        type=Path,
        help="with --tcp: where to write the token, readable by this user only (default: "
        "$XDG_RUNTIME_DIR/dice-lsp/tcp/PORT.token, else ~/.cache/dice-lsp/tcp/PORT.token; the editor "
        "clients read it from there)",
    )
    parser.add_argument("--log-level", default="WARNING", choices=["DEBUG", "INFO", "WARNING", "ERROR"],
                        help="what the server logs on stderr (default: %(default)s)")
    args = parser.parse_args(argv)
    logging.basicConfig(stream=sys.stderr, level=args.log_level, format="%(asctime)s %(name)s %(levelname)s %(message)s")
    if not args.tcp:
        return transport.serve_stdio(create_server)
    return transport.serve_tcp(create_server, args.host, args.port, args.token or None, args.token_file)

if __name__ == "__main__":
    sys.exit(main())
