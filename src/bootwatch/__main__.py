from bootwatch.cli import main

raise SystemExit(main())
