"""One module per `musicgen` subcommand; each exposes `register(subparsers)`."""
