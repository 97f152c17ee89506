"""``python -m geocont.book``: build the book or run one chapter (see :mod:`geocont.book.build`)."""

from .build import main

main()
