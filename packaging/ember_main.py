"""Entry point of the packaged app (PyInstaller): the `ember` command, which opens the
desktop app when started without arguments or with a .gguf file (a double-click, a file
dropped on the icon, "Open with" on Windows/Linux, the Finder on macOS)."""
import multiprocessing
import sys


def exit_code(status) -> int:
    """sys.exit's rule: None is 0, an int is itself, anything else is printed and is 1."""
    if status is None:
        return 0
    if isinstance(status, int):
        return status
    print(status, file=sys.stderr)
    return 1


def end_process(code: int) -> None:
    """Windows: ends the process once the app and Python's exit handlers are done, without
    ExitProcess's DLL-detach step. ember.dll's (the mingw-w64 runtime's static and thread
    destructors) could wait there for ever on threads ExitProcess had already ended: the
    window was gone but the process stayed, so the onefile's bootloader never returned or
    cleaned its folder (under wine: `--self-test` passed, then never exited; the loader's
    last trace `MODULE_InitDLL (... L"ember.dll",PROCESS_DETACH,...) - CALL`, no RETURN;
    docs/PACKAGING.md). Every file the app writes is closed by then."""
    import atexit
    import ctypes
    import logging
    atexit._run_exitfuncs()
    logging.shutdown()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None:
                stream.flush()
        except (OSError, ValueError):
            pass
    k32 = ctypes.WinDLL("kernel32")
    k32.GetCurrentProcess.restype = ctypes.c_void_p
    k32.TerminateProcess(ctypes.c_void_p(k32.GetCurrentProcess()), code & 0xFFFFFFFF)


if __name__ == "__main__":
    multiprocessing.freeze_support()  # a frozen child process must not rerun the CLI
    from ember.commands.cli import main

    try:
        code = exit_code(main())
    except SystemExit as e:  # argparse, --help
        code = exit_code(e.code)
    if sys.platform == "win32":
        end_process(code)
    sys.exit(code)
