package store

import (
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/dgraph-io/badger/v4"
	"github.com/dgraph-io/badger/v4/options"
)

// maxValueThreshold is the largest value threshold badger takes (its maxValueThreshold):
// records up to this size can be kept inline.
const maxValueThreshold = 1 << 20

// BadgerOptions are the badger options every database of a node starts from, the store's
// and the hints': dir (none InMemory), SyncWrites, and these choices made once:
//   - no conflict detection: each database serializes the writers of one key itself (the
//     store with a striped lock, see Store.Apply), so badger's tracking is pure overhead;
//   - damaged data is an error, never a wrong answer: every block's and value's checksum is
//     verified when it is read. Whole tables are verified before badger opens them
//     (verifyTables): badger's own check at open panics in a goroutine of its own on a
//     mismatch (v4.9.6, Table.VerifyChecksum), which no caller can recover;
//   - every record in the LSM tree (DefaultValueThreshold), and value-log files of
//     DefaultValueLogFileSize for a lower Config.ValueThreshold (see config.go);
//   - badger's log goes to logger through badgerLogger, which does the filtering (not
//     WithLoggingLevel: it replaces the logger with badger's own, on stderr).
func BadgerOptions(dir string, inMemory, syncWrites bool, logger *slog.Logger) badger.Options {
	if inMemory {
		dir = ""
	}
	return badger.DefaultOptions(dir).
		WithInMemory(inMemory).
		WithSyncWrites(syncWrites).
		WithDetectConflicts(false).
		WithValueThreshold(DefaultValueThreshold).
		WithValueLogFileSize(DefaultValueLogFileSize).
		WithChecksumVerificationMode(options.OnBlockRead).
		WithVerifyValueChecksum(true).
		WithLogger(badgerLogger{logger})
}

// Aside is a badger database opened by OpenAside.
type Aside struct {
	DB *badger.DB
	// Damage is what was found damaged at open ("" = nothing), MovedTo where the damaged
	// files went.
	Damage, MovedTo string
}

// OpenAside opens a badger database whose loss costs no acknowledged write (the hints:
// every write a hint holds is also on the replicas that acknowledged it), so damage never
// refuses it, unlike the store: a damaged database (a table that will not open or fails a
// block checksum, a value-log entry that fails its checksum, badger refusing its MANIFEST
// or log, a panic, or check failing on
// damaged data) is moved aside to damaged-<time>/ and opened empty. check runs on each
// database opened (a panic in it is an error); hadTables tells it whether the directory
// held tables before badger opened it (an empty database then lost them). name prefixes the
// errors ("hints").
func OpenAside(name string, opts badger.Options, check func(db *badger.DB, hadTables bool) error) (Aside, error) {
	db, err := openAside(name, opts, check)
	if !errors.Is(err, ErrDamaged) {
		return Aside{DB: db}, err
	}
	dst, qerr := quarantine(opts.Dir)
	if qerr != nil {
		return Aside{}, fmt.Errorf("%w: move damaged %s aside: %v", err, name, qerr)
	}
	damage := err.Error()
	if db, err = openAside(name, opts, check); err != nil {
		return Aside{}, fmt.Errorf("open %s %q after moving damaged files aside: %w", name, opts.Dir, err)
	}
	return Aside{DB: db, Damage: damage, MovedTo: dst}, nil
}

// openAside opens the database and runs check. Damaged files give ErrDamaged with a
// one-line reason.
func openAside(name string, opts badger.Options, check func(db *badger.DB, hadTables bool) error) (db *badger.DB, err error) {
	damaged := func(reason string) error {
		return fmt.Errorf("%s %w in %s: %s", name, ErrDamaged, opts.Dir, oneLine(reason))
	}
	hadTables := false
	if !opts.InMemory {
		if bad := verifyFiles(opts.Dir, opts); bad != "" {
			return nil, damaged(bad)
		}
		tables, _ := filepath.Glob(filepath.Join(opts.Dir, "*.sst"))
		hadTables = len(tables) > 0
	}
	db, err = openBadger(opts)
	if err != nil {
		if isDamage(err) {
			return nil, damaged(err.Error())
		}
		return nil, fmt.Errorf("open %s %q: %w", name, opts.Dir, err)
	}
	defer func() {
		if p := recover(); p != nil {
			err = panicError(p)
		}
		if err != nil {
			db.Close()
			if isDamage(err) {
				err = damaged(err.Error())
			} else {
				err = fmt.Errorf("open %s %q: %w", name, opts.Dir, err)
			}
			db = nil
		}
	}()
	return db, check(db, hadTables)
}
