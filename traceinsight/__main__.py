from traceinsight.cli import main

main()
