"""The code-generation back end as named passes over one :class:`~gen.codegen.plan.KernelPlan`.

:mod:`gen.codegen.config` holds every option and tuned threshold (:class:`CodegenConfig`),
:mod:`gen.codegen.plan` the plan the passes fill and its serialisation (the manifest's
``codegen`` part); one module per pass reads the config and records its decision;
:mod:`gen.codegen.writers` puts the C writers behind one interface.  docs/ARCHITECTURE.md
draws the passes.  Nothing is imported here: each module is imported by its own name.
"""
