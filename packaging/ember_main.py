"""Entry point of the packaged app (PyInstaller): the `ember` command, which opens the
desktop app when started without arguments or with a .gguf file (a double-click, a file
dropped on the icon, "Open with" on Windows/Linux, the Finder on macOS)."""
import multiprocessing
import sys

if __name__ == "__main__":
    multiprocessing.freeze_support()  # a frozen child process must not rerun the CLI
    from ember.cli import main

    sys.exit(main())
