from tui.worker.process import main

raise SystemExit(main())
