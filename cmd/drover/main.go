// Command drover runs Drover: the dev environment, workers, migrations, and the
// operator commands for jobs and the dead-letter queue. See `drover --help`.
package main

import (
	"os"

	"github.com/drover-dev/drover/internal/cli"
)

func main() { os.Exit(cli.Main(os.Args[1:], os.Stdout, os.Stderr)) }
