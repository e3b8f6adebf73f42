"""`python -m tuneboard_client.cli`."""

from tuneboard_client.cli import main

if __name__ == "__main__":
    main()
