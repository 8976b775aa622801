package testbed

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gauntlet-dev/gauntlet/bench/result"
	"github.com/gauntlet-dev/gauntlet/scenarios/framework/workspace"
)

// Checkout is a git worktree of one revision of this workspace's repository:
// side A of an A/B run, built and installed from there.
type Checkout struct {
	// Ref is the reference it was asked for (e.g. "main", "HEAD~3").
	Ref string
	// Revision is the commit Ref named.
	Revision string
	// Root is the worktree's directory.
	Root string

	repo string
}

// CheckoutRef checks ref out into a temporary detached worktree of the
// workspace's repository. A ref that names no commit is an error that says
// so; Remove deletes the worktree.
func CheckoutRef(ctx context.Context, ref string) (*Checkout, error) {
	repo, err := workspace.Root()
	if err != nil {
		return nil, err
	}
	rev, err := result.Git(ctx, repo, "rev-parse", "--verify", "--quiet", ref+"^{commit}")
	if err != nil || rev == "" {
		return nil, fmt.Errorf("BASE_REF=%s names no commit of the repository at %s: give a branch, tag or commit (`git log --oneline` lists them)", ref, repo)
	}
	dir, err := os.MkdirTemp("", "gauntlet-bench-base-")
	if err != nil {
		return nil, fmt.Errorf("creating a directory for the worktree of %s: %w", ref, err)
	}
	root := filepath.Join(dir, "checkout")
	if _, err := result.Git(ctx, repo, "worktree", "add", "--detach", root, rev); err != nil {
		return nil, errors.Join(fmt.Errorf("checking out BASE_REF=%s (%s): %w", ref, rev, err), os.RemoveAll(dir))
	}
	return &Checkout{Ref: ref, Revision: rev, Root: root, repo: repo}, nil
}

// Remove deletes the worktree and its directory, and forgets it in the
// repository.
func (c *Checkout) Remove(ctx context.Context) error {
	_, err := result.Git(ctx, c.repo, "worktree", "remove", "--force", c.Root)
	return errors.Join(err, os.RemoveAll(filepath.Dir(c.Root)))
}
