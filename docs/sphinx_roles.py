"""A griffe extension (mkdocs.yml, mkdocstrings' ``extensions``): the docstrings' Sphinx roles become links.

The package's docstrings cross-reference with reST roles (``:class:`Name```, ``:func:`name```,
``:mod:`recipes.core.sources.storage```, ``:meth:``, ``:attr:``, ``:data:``, ``:exc:``), which mkdocstrings'
Google-style rendering prints as written. Once griffe has loaded the package, this rewrites each role
into an autorefs cross-reference, its target resolved in the scope where the docstring stands (an
imported name leads to where it is defined, a method's ``:meth:`state_dict``` to its class's), so the
docstrings keep the syntax every editor and ``help()`` already reads. The reference is optional:
a target no page renders (torch's names, a private module) shows as code, not as a broken link.
"""

import html
import re
from typing import Any

from griffe import AliasResolutionError, CyclicAliasError, Extension, GriffeLoader, Module, NameResolutionError, Object

# ``:role:`target```, ``:py:role:`target```, ``:role:`~a.b``` (title ``b``), ``:role:`!a``` (no link)
# and ``:role:`title <target>```, as Sphinx reads them
ROLE = re.compile(r":(?:py:)?(?P<role>class|func|meth|mod|attr|data|exc|obj|const):`(?P<content>[^`]+)`")
TITLED = re.compile(r"(?P<title>.+?)\s*<(?P<target>[^<>]+)>$", flags=re.S)


def _documented(obj: Object) -> list[Object]:
    """``obj`` and every object defined in it (imported names are documented where they are defined)."""
    found = [obj]
    for member in obj.members.values():
        if not member.is_alias:
            found += _documented(member)
    return found


class SphinxRoles(Extension):
    """Rewrites the Sphinx roles of every docstring in a package once griffe has loaded it."""

    def on_package(self, *, pkg: Module, loader: GriffeLoader, **kwargs: Any) -> None:
        documented = _documented(pkg)
        self.package = pkg
        self.by_path = {obj.path: obj for obj in documented}
        paths_by_name: dict[str, set[str]] = {}
        for obj in documented:
            paths_by_name.setdefault(obj.name, set()).add(obj.path)
        self.only_one = {name: paths.pop() for name, paths in paths_by_name.items() if len(paths) == 1}
        for obj in documented:
            if obj.docstring is not None:
                obj.docstring.value = ROLE.sub(lambda match: self.crossref(obj, match), obj.docstring.value)

    def crossref(self, scope: Object, match: re.Match[str]) -> str:
        """One role as a cross-reference: the target's title as code, linked where a page documents it."""
        content = " ".join(match["content"].split())
        if titled := TITLED.match(content):
            title, target = titled["title"], titled["target"]
        else:
            target = content.lstrip("~!")
            title = target.rpartition(".")[2] if content.startswith("~") else target
        title = f"`{title}`"  # Markdown escapes it as code: dunder names stay names, not bold
        if content.startswith("!"):
            return title
        identifier = html.escape(self.identifier(scope, match["role"], target.removesuffix("()")), quote=True)
        # autorefs turns the tag into a link, or with ``optional`` into plain code when no page has the target
        return f'<autoref identifier="{identifier}" optional>{title}</autoref>'

    def identifier(self, scope: Object, role: str, target: str) -> str:
        """``target``'s full path as seen from ``scope``: its first name resolved there (a member, an
        import, a name of an enclosing scope) and the rest appended."""
        first, dot, rest = target.partition(".")
        try:
            path = scope.resolve(first) + dot + rest
        except NameResolutionError:
            # a name the docstring's module does not import: the one object of that name in the package,
            # or a full path (a public spelling leads to where it is defined)
            return self.only_one.get(target) or self.defined_at(target)
        # a package that imports ``name`` from its submodule ``name``: griffe keeps the submodule under
        # the name, Python the imported object, which is what a role other than :mod: means
        found = self.by_path.get(path)
        if role != "mod" and found is not None and found.is_module and target in found.members:
            return f"{path}.{target}"
        return self.defined_at(path)

    def defined_at(self, path: str) -> str:
        """Where the object at ``path`` is defined: a public spelling (``recipes.core.DataError``,
        ``recipes.core.storage.shown``) leads to the module that defines it, whose page documents it."""
        if not path.startswith(self.package.path + "."):
            return path
        try:
            found = self.package[path.removeprefix(self.package.path + ".")]
            return found.final_target.path if found.is_alias else path
        except (KeyError, AliasResolutionError, CyclicAliasError):
            return path
