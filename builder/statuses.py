"""Every status a catalog row can hold, one ``StrEnum`` per status column (``COLUMNS``): the
catalog's CHECKs allow exactly these (a test compares), and SQL takes them as parameters."""

from __future__ import annotations

from enum import StrEnum


class RunStatus(StrEnum):
    """``stage_runs.status``: a stage run from start to end."""

    RUNNING = "running"
    DONE = "done"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class ConceptStatus(StrEnum):
    """``concepts.status``: a candidate until concept dedup keeps, merges or drops it."""

    CANDIDATE = "candidate"
    KEPT = "kept"
    MERGED = "merged"
    DROPPED = "dropped"


class LLMStatus(StrEnum):
    """``llm_requests.status``: the outcome of one LLM work item (``builder.llm.base``)."""

    OK = "ok"
    FAILED = "failed"  # invalid after the re-asks
    REFUSED = "refused"  # blocked by the service
    ERROR = "error"  # transport: a later ask may succeed


class QueryStatus(StrEnum):
    """``queries.status``: an LLM outcome for the native query, or stale once the concept
    is no longer kept."""

    OK = "ok"
    FAILED = "failed"
    REFUSED = "refused"
    ERROR = "error"
    STALE = "stale"


class SearchStatus(StrEnum):
    """``searches.status``."""

    PENDING = "pending"
    OK = "ok"
    EMPTY = "empty"
    FAILED = "failed"
    SKIPPED = "skipped"  # a planned search the crawl does not run (its reason says why)


class DownloadStatus(StrEnum):
    """``downloads.status``: every terminal status a URL can end with."""

    OK = "ok"
    DUPLICATE = "duplicate"
    HTTP_ERROR = "http_error"
    TIMEOUT = "timeout"
    CONNECTION_ERROR = "connection_error"
    TOO_LARGE = "too_large"
    NOT_AN_IMAGE = "not_an_image"
    CORRUPT_IMAGE = "corrupt_image"
    UNSUPPORTED_FORMAT = "unsupported_format"
    DECOMPRESSION_BOMB = "decompression_bomb"
    BLOCKED_HOST = "blocked_host"
    OPTED_OUT = "opted_out"
    REDIRECT_LOOP = "redirect_loop"
    TOO_MANY_REDIRECTS = "too_many_redirects"
    UNSUPPORTED_SCHEME = "unsupported_scheme"
    INVALID_URL = "invalid_url"
    DNS_ERROR = "dns_error"
    MISSING_FILE = "missing_file"
    FETCH_ERROR = "fetch_error"
    INTERNAL_ERROR = "internal_error"


class ItemStatus(StrEnum):
    """``items.status``: one search-result occurrence from crawl through dedup and review."""

    PENDING = "pending"
    OK = "ok"
    FAILED = "failed"
    DUPLICATE = "duplicate"
    NEAR_DUPLICATE = "near_duplicate"
    NEEDS_REVIEW = "needs_review"
    KEPT = "kept"
    REMOVED = "removed"


#: Items that are in the dataset: downloaded and not removed as a duplicate.
USABLE_ITEMS = (ItemStatus.OK, ItemStatus.KEPT)


class DedupStatus(StrEnum):
    """``dedup_groups.status``: decided automatically, waiting for review, or reviewed."""

    AUTO = "auto"
    NEEDS_REVIEW = "needs_review"
    REVIEWED = "reviewed"


class TagStatus(StrEnum):
    """``tags.status`` (``builder.tagging.rules``)."""

    OK = "ok"
    RETRY = "retry"
    FAILED = "failed"
    REFUSED = "refused"
    TRANSIENT = "transient"


class TermOutcome(StrEnum):
    """``term_reviews.outcome``: the decision of one query-term review task."""

    ACCEPTED = "accepted"
    CORRECTED = "corrected"
    UNCLEAR = "unclear"
    PENDING = "pending"
    NEEDS_REVIEW = "needs_review"
    STALE = "stale"


#: Every checked status column -> the enum of its allowed values.
COLUMNS: dict[tuple[str, str], type[StrEnum]] = {
    ("stage_runs", "status"): RunStatus,
    ("concepts", "status"): ConceptStatus,
    ("llm_requests", "status"): LLMStatus,
    ("queries", "status"): QueryStatus,
    ("searches", "status"): SearchStatus,
    ("downloads", "status"): DownloadStatus,
    ("items", "status"): ItemStatus,
    ("dedup_groups", "status"): DedupStatus,
    ("tags", "status"): TagStatus,
    ("term_reviews", "outcome"): TermOutcome,
}
