"""``python -m cprsim``: the command line, as the ``cprsim`` script (:func:`cprsim.cli.main`)."""

from cprsim.cli import main

if __name__ == "__main__":
    main()
