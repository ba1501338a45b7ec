from partita.cli.main import main

main()
