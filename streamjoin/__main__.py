from streamjoin.cli import main

main()
