"""The traditional compiler: every pass a data-parallel tensor program over a batch of sources.

    sources --plan--> sorted by length, cut into chunks --pack--> bytes [B, L] --lex--> tokens [B, T]
            --regroup--> tokens [B', T'] --rules--> structure, first token-level error --parse--> trees
            --semantic--> bindings, errors --exact--> rows a hash collision misled --codegen--> ProgramBatch [B, N]

One pass a module, named by the pass (the reference lexer's and rules' batch forms are batch_lexer.py and
batch_rules.py, beside lang/lexer.py and lang/rules.py); driver.py runs them over a batch, chunk by chunk,
on one device or, for a big CPU batch, in worker processes (runtime/workers.py). This face re-exports the
driver's public names; a pass's module is reached by its own name (`traditional.batch_lexer`).
"""

from .driver import (
    PASSES,
    Chunk,
    chunk_cells,
    chunk_closing,
    compile_batch,
    compile_chunk,
    compile_stream,
    compile_to_batches,
    default_workers,
    warm_up,
    worker_pool,
)

__all__ = ["PASSES", "Chunk", "chunk_cells", "chunk_closing", "compile_batch", "compile_chunk", "compile_stream",
           "compile_to_batches", "default_workers", "warm_up", "worker_pool"]
