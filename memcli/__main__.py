try:
    from memcli.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python loads the entry point: 130, as later
    import os
    import sys

    sys.stderr.write("memcli: interrupted\n")
    os._exit(130)

if __name__ == "__main__":
    main()
