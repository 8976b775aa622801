// Command gauntlet-standin stands in for a container whose image cannot be built here (a
// metrics proxy sidecar, a hook Job's kubectl image), as a target description's source.standIns
// names it. It does none of the image's work: it says what it is and runs as its image's ENV
// GAUNTLET_STAND_IN says — untilStopped: it stays up until SIGTERM (or SIGINT) and exits 0;
// exitAtOnce: it exits 0 at once. Whatever command and arguments the chart gives it are
// printed and ignored.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

func main() {
	runs := os.Getenv(workspace.StandInEnv)
	fmt.Printf("gauntlet stand-in (%s=%s), run as: %s\n", workspace.StandInEnv, runs, strings.Join(os.Args, " "))
	switch runs {
	case workspace.StandInExitAtOnce:
	case workspace.StandInUntilStopped:
		stop := make(chan os.Signal, 1)
		signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
		fmt.Printf("stopped by %s\n", <-stop)
	default:
		fmt.Fprintf(os.Stderr, "gauntlet stand-in: %s=%q: want %s or %s (the image's ENV, from the target's source.standIns[].runs)\n",
			workspace.StandInEnv, runs, workspace.StandInUntilStopped, workspace.StandInExitAtOnce)
		os.Exit(2)
	}
}
