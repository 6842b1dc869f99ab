from ms.cli.run import main

main()
