package drover_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/drover-dev/drover"
	"github.com/drover-dev/drover/driver/sqlitedriver"
)

type GreetArgs struct {
	Name string `json:"name"`
}

// Enqueue a job and run it with a worker, on an embedded SQLite database.
func Example() {
	dir, _ := os.MkdirTemp("", "drover-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := drover.Open(ctx, filepath.Join(dir, "drover.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.MigrateUp(ctx); err != nil {
		log.Fatal(err)
	}
	client, _ := drover.NewClient(db, nil)

	workers := drover.NewWorkers()
	drover.Register(workers, "greet", func(ctx context.Context, job *drover.Job, args GreetArgs) (any, error) {
		return "hello, " + args.Name, nil
	})
	worker, _ := drover.NewWorker(client, &drover.WorkerConfig{Workers: workers})
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer worker.Stop(ctx)

	res, err := client.Enqueue(ctx, "greet", GreetArgs{Name: "world"}, nil)
	if err != nil {
		log.Fatal(err)
	}
	job := waitFinished(client, res.Job.ID)
	fmt.Println(job.Status, string(job.Result))
	// Output: succeeded "hello, world"
}

// A job enqueued inside the caller's transaction exists only if it commits.
func ExampleClient_EnqueueTx() {
	dir, _ := os.MkdirTemp("", "drover-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := sqlitedriver.Open(filepath.Join(dir, "drover.db"), sqlitedriver.Options{})
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.MigrateUp(ctx); err != nil {
		log.Fatal(err)
	}
	client, _ := drover.NewClient(db, nil)

	for _, commit := range []bool{true, false} {
		tx, err := db.DB().BeginTx(ctx, nil) // also write your own rows with tx
		if err != nil {
			log.Fatal(err)
		}
		res, err := client.EnqueueTx(ctx, tx, "send_receipt", map[string]int{"order": 42}, nil)
		if err != nil {
			log.Fatal(err)
		}
		if commit {
			err = tx.Commit()
		} else {
			err = tx.Rollback()
		}
		if err != nil {
			log.Fatal(err)
		}
		_, err = client.Get(ctx, res.Job.ID)
		fmt.Printf("commit=%t: job found=%t\n", commit, !errors.Is(err, drover.ErrNotFound))
	}
	// Output:
	// commit=true: job found=true
	// commit=false: job found=false
}

// A handler error is retried under the kind's backoff; Permanent skips the retries.
func ExampleWithBackoff() {
	dir, _ := os.MkdirTemp("", "drover-example")
	defer os.RemoveAll(dir)
	ctx := context.Background()

	db, err := drover.Open(ctx, filepath.Join(dir, "drover.db"), nil)
	if err != nil {
		log.Fatal(err)
	}
	defer db.Close()
	if err := db.MigrateUp(ctx); err != nil {
		log.Fatal(err)
	}
	client, _ := drover.NewClient(db, nil)

	workers := drover.NewWorkers()
	drover.Register(workers, "charge", func(ctx context.Context, job *drover.Job, args struct{ Card string }) (any, error) {
		switch {
		case args.Card == "stolen":
			return nil, drover.Permanent(errors.New("card declined"))
		case job.Attempt < 3:
			return nil, fmt.Errorf("gateway busy (attempt %d)", job.Attempt)
		}
		return "charged", nil
	}, drover.WithBackoff(drover.ExponentialBackoff(time.Millisecond, 10*time.Millisecond)))
	worker, _ := drover.NewWorker(client, &drover.WorkerConfig{Workers: workers, PollInterval: 20 * time.Millisecond})
	if err := worker.Start(ctx); err != nil {
		log.Fatal(err)
	}
	defer worker.Stop(ctx)

	for _, card := range []string{"ok", "stolen"} {
		res, err := client.Enqueue(ctx, "charge", map[string]string{"Card": card}, nil)
		if err != nil {
			log.Fatal(err)
		}
		job := waitFinished(client, res.Job.ID)
		fmt.Printf("%s: %s after %d attempts, %d errors recorded, error %q\n",
			card, job.Status, job.Attempt, len(job.Errors), job.Error)
	}
	// Output:
	// ok: succeeded after 3 attempts, 2 errors recorded, error ""
	// stolen: failed after 1 attempts, 1 errors recorded, error "card declined"
}

// waitFinished polls the job until it is succeeded, failed or canceled.
func waitFinished(client *drover.Client, id int64) *drover.Job {
	deadline := time.Now().Add(30 * time.Second)
	for {
		job, err := client.Get(context.Background(), id)
		if err != nil {
			log.Fatal(err)
		}
		switch job.Status {
		case drover.StatusSucceeded, drover.StatusFailed, drover.StatusCanceled:
			return job
		}
		if time.Now().After(deadline) {
			log.Fatalf("job %d still %s after 30s", id, job.Status)
		}
		time.Sleep(10 * time.Millisecond)
	}
}
