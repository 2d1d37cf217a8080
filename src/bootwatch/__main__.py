from bootwatch._console import main

main()
