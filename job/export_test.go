package job

// Crash stops the job as a crash would (see crash), for tests that prove a
// crash loses nothing.
func (j *Job) Crash() { j.crash() }
