from ms.cli import main

main()
