"""Every sentence intake writes into a student's notes or the skipped list; tests import these, never retype them."""

from __future__ import annotations

# the skipped list (entries of the submissions folder that are not graded)
HIDDEN = "hidden entry (its name starts with a dot)"
SYSTEM_FOLDER = "a system folder, not a submission"
TOP_SYMLINK = "a symbolic link; only real files and folders are read"
NOT_REGULAR = "neither a regular file nor a folder (a device, FIFO or socket)"
LOOSE_FILE = (
    "a loose file that is not a Canvas bulk-download file: put each student's files in a folder, .zip or .tar.gz "
    "named by the student id"
)
NOT_A_SUBMISSION = (
    "not a submission: only folders, .zip/.tar/.tar.gz/.tgz archives, notebooks and Canvas files are read"
)
NOTEBOOKS_UNSUPPORTED = "notebooks not supported by this grader version"
SAME_STUDENT = "also {other} for the same student {student}; {other} was graded ({rule})"
DUPLICATE_ID = (
    "submission_metadata.yml gives this folder the student id {student}, as it does {others}: each is graded "
    "apart, flagged duplicate-id, with no sid for a gradebook import to match; check which student is which"
)
METADATA_UNREADABLE = "submission_metadata.yml could not be read ({error}); Gradescope folders keep their own names"
METADATA_USED = "Gradescope metadata: names, emails and student ids of the submission_* folders"
NOT_IN_METADATA = "{folder} is not listed in submission_metadata.yml; it is keyed by its folder name"
DOWNLOAD_OPENED = "{what}: graded as the class inside it, each student from their own files"
CANVAS_DOWNLOAD = "a Canvas bulk download"
GRADESCOPE_EXPORT = "a Gradescope export"
WRAPPER = "a folder holding {what}"
UNSAFE_MEMBER = "a member of {archive} with an absolute or '..' path: never read"
CLASS_ARCHIVE_UNREADABLE = "{name} could not be opened as a class's zip: {error}"
CLASS_NOT_ZIP = (
    "a class given as an archive must be a .zip (what Canvas and Gradescope download); unpack it and give the folder"
)
CLASS_FOLDER = "the only folder in the class's zip: its entries are the class"
CLASS_NOT_FOLDER = "neither a folder nor a .zip archive of submissions"

# notes in a student's result
GRADED_FILE = "{exercise}: graded {label}"
STUB_ONLY = "{exercise}: {label} is the unmodified stub"
STUB_IGNORED = "{exercise}: ignored {labels}: identical to the stub"
DUPLICATES_IGNORED = "{exercise}: ignored {labels}: same content as the graded file"
AMBIGUOUS = (
    "{exercise}: AMBIGUOUS, {count} different files: graded {label} (the shallowest, then the one named exactly "
    "{exercise}.py, then the first by path); not graded: {others}"
)
SKIPPED_LINK = "skipped {name}: a symbolic link (only regular files inside the submission are read)"
SKIPPED_SPECIAL = "skipped {name}: not a regular file (a device, FIFO or socket)"
SKIPPED_DIR = "skipped {name}: a folder named like an exercise file"
SKIPPED_UNSAFE = "skipped {name}: an archive member with an absolute or '..' path"
SKIPPED_TOO_BIG = "skipped {name}: larger than {limit}"
SKIPPED_DEEP = "skipped {name}: archives nested deeper than {depth} levels are not opened"
SKIPPED_ENCRYPTED = "skipped {name}: an encrypted archive member"
SKIPPED_COMPRESSION = "skipped {name}: compressed with bzip2 or lzma; zip it again with the usual (deflate) method"
ARCHIVE_UNREADABLE = "{name} could not be opened: {error}"
ARCHIVE_LIMIT = "{name}: stopped reading after {limit}; the rest of the archive was not read"
UNREADABLE = "{label} could not be read: {error}"
UNDECODABLE = "{label} is not valid Python source text: {error}"
READ_AS_CP1252 = (
    "{label}: not UTF-8 and no `# coding:` line; read as Windows-1252 (Python itself would refuse it: save the file "
    "as UTF-8)"
)
NOTEBOOK_AMBIGUOUS = (
    "{exercise}: AMBIGUOUS, {count} different notebooks give it: graded {label} (the one giving the most "
    "exercises, then the shallowest, then the first by name); not graded: {others}"
)
NOTEBOOK_USED = "{exercise}: graded from the notebook {label}"
NOTEBOOK_SHADOWED = "ignored the notebook {name}: every exercise it could give already has a .py file"
NOTEBOOK_NOTE = "{name}: {note}"
NOTHING_FOUND = "no exercise file (ex1.py .. ex4.py, or a notebook) was found in the submission"
CANVAS_LATE = "Canvas marks this submission late"
ID_COLLISION = (
    "the id {id} also names {others} from another source: each is graded apart from its own files, under its own "
    "key; check which student is which"
)
SUBMITTED_AT = "Gradescope: submitted at {when}"
ALSO_SUBMITTED = "not graded: {other} ({rule})"
