from orkeon_actors.cli.main import main

raise SystemExit(main())
