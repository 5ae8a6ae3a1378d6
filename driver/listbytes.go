package driver

// JobBytes is what a job weighs in a listing (ListParams.MaxBytes): the
// lengths of its args, metadata, result, error and error history, the parts
// whose size its callers chose. The rest is a few hundred bytes a job, which
// a listing's Limit bounds.
func JobBytes(j *Job) int {
	n := len(j.Args) + len(j.Metadata) + len(j.Result) + len(j.Error)
	for _, e := range j.Errors {
		n += len(e.Error) + len(e.Stack)
	}
	return n
}

// DefaultListLimit is the jobs a listing answers when ListParams.Limit is 0.
const DefaultListLimit = 100

// ListFull reports whether a listing of p that has read n jobs weighing
// bytes (JobBytes) in all has read enough: Limit jobs (0: 100), or, with
// MaxBytes, two or more jobs weighing more than MaxBytes. A driver reads no
// row after it.
func ListFull(p ListParams, n, bytes int) bool {
	limit := p.Limit
	if limit <= 0 {
		limit = DefaultListLimit
	}
	return n >= limit || (p.MaxBytes > 0 && n >= 2 && bytes > p.MaxBytes)
}

// PageFit is how many of jobs, a listing's answer in its order, make a page
// of at most limit jobs weighing at most maxBytes (0: no bound) in all; the
// first job always does, whatever it weighs. A caller that listed limit+1
// jobs with MaxBytes = maxBytes gets fewer than len(jobs) exactly when more
// jobs follow the page: the listing stops after the job that goes over
// (ListFull), and that job is not in the page.
func PageFit(jobs []*Job, limit, maxBytes int) int {
	bytes := 0
	for i, j := range jobs {
		if i == limit {
			return i
		}
		bytes += JobBytes(j)
		if i > 0 && maxBytes > 0 && bytes > maxBytes {
			return i
		}
	}
	return len(jobs)
}
