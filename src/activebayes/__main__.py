from activebayes.cli import _console_main

if __name__ == "__main__":
    _console_main()
