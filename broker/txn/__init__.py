"""The transaction coordinator: transactional ids, producer epochs and transaction states on ``__transaction_state``."""
